package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/topology"
)

// The GPU map comes in three calls, so that a cluster of thousands of
// cards answers in a few kilobytes and nothing is drawn per card until
// asked:
//
//	GET /api/gpus              the cards counted by domain (GPUMap)
//	GET /api/gpus/nodes        the nodes of a domain, a line each
//	GET /api/gpus/nodes/{name} one node's cards and holders
//
// Each takes the filter (node, model, holder: filterOf) and the first two
// the topology to group by (topology: an aischedtopology's name; the
// first by name when left out).

// GPUMap is the GPU map's first answer: the cards counted by domain of a
// topology or, without one, by node; no card is listed.
type GPUMap struct {
	Summary GPUSummary `json:"summary"`
	Filter  GPUFilter  `json:"filter"`
	// Topologies are the aischedtopologies, by name; Topology is the one
	// the domains are of ("" for none) and Levels its levels.
	Topologies []string   `json:"topologies"`
	Topology   string     `json:"topology,omitempty"`
	Levels     []MapLevel `json:"levels,omitempty"`
	Domains    []Domain   `json:"domains,omitempty"`
	// Nodes are the nodes a line each, when no topology groups them.
	Nodes []NodeRow `json:"nodes,omitempty"`
	// Note says why no topology groups the map when the topologies could
	// not be read (the user may not list them).
	Note string `json:"note,omitempty"`
}

// GPUNodes is the nodes of a domain, a line each.
type GPUNodes struct {
	Nodes []NodeRow `json:"nodes"`
}

// BuildGPUMap counts the nodes' cards (LayOutGPUs, then a filter's
// Select) by the domains of t, or by node where t is nil.
func BuildGPUMap(nodes []GPUNode, t *topology.Topology) GPUMap {
	m := GPUMap{Summary: summarize(nodes), Topologies: []string{}}
	if t == nil {
		m.Nodes = rowsOf(nodes)
		return m
	}
	m.Topology, m.Levels, m.Domains = t.Name, levelsOf(t), GroupGPUs(t, nodes)
	return m
}

func rowsOf(nodes []GPUNode) []NodeRow {
	out := make([]NodeRow, 0, len(nodes))
	for i := range nodes {
		out = append(out, nodes[i].NodeRow)
	}
	return out
}

func (s *Server) gpuMap(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	in, code, err := readGPUs(r, c)
	if err != nil {
		writeError(w, code, err)
		return
	}
	m := BuildGPUMap(in.filter.Select(in.nodes), in.topology)
	m.Filter, m.Note = in.filter, in.note
	for _, t := range in.topologies {
		m.Topologies = append(m.Topologies, t.Name)
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) gpuDomainNodes(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	id := r.URL.Query().Get("domain")
	if len(id) > maxDomainLen {
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("domain: %d characters, at most %d", len(id), maxDomainLen)})
		return
	}
	in, code, err := readGPUs(r, c)
	if err != nil {
		writeError(w, code, err)
		return
	}
	nodes := in.filter.Select(in.nodes)
	if id != "" {
		if in.topology == nil {
			writeJSON(w, http.StatusBadRequest, apiError{Error: "domain: no topology to find it in"})
			return
		}
		if nodes = NodesIn(in.topology, nodes, id); len(nodes) == 0 {
			writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("domain %q: no GPU node of topology %s is there%s", id, in.topology.Name, in.filter.words())})
			return
		}
	}
	writeJSON(w, http.StatusOK, GPUNodes{Nodes: rowsOf(nodes)})
}

func (s *Server) gpuNode(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	ctx := r.Context()
	name := r.PathValue("name")
	filter, err := filterOf(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return
	}
	node, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	var invs []aischedv1alpha1.GPUInventory
	switch inv, err := c.aisched.AischedV1alpha1().GPUInventories().Get(ctx, name, metav1.GetOptions{}); {
	case err == nil:
		invs = append(invs, *inv)
	case !apierrors.IsNotFound(err):
		writeError(w, http.StatusBadGateway, err)
		return
	}
	pods, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	dra, err := listDRA(ctx, c.kube, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	nodes := LayOutGPUs([]corev1.Node{*node}, invs, pods.Items, dra)
	if len(nodes) == 0 {
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("node %s has no GPU cards", name)})
		return
	}
	filter.Node = "" // the node is named
	if nodes = filter.Select(nodes); len(nodes) == 0 {
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("node %s: no card%s", name, filter.words())})
		return
	}
	writeJSON(w, http.StatusOK, nodes[0])
}

// maxDomainLen bounds a domain's ID: 8 levels of label values of at most
// 63 characters and their separators.
const maxDomainLen = topology.MaxLevels * 64

// gpuInputs are what the first two calls of the GPU map read.
type gpuInputs struct {
	nodes      []GPUNode
	filter     GPUFilter
	topologies []*topology.Topology
	// topology is the one asked for, else the first; nil for none.
	topology *topology.Topology
	note     string
}

// readGPUs reads the request's filter and topology and lays out the
// cluster's cards as the user may list them; an error comes with the
// status code to answer.
func readGPUs(r *http.Request, c *clients) (gpuInputs, int, error) {
	ctx := r.Context()
	var in gpuInputs
	q := r.URL.Query()
	var err error
	if in.filter, err = filterOf(q); err != nil {
		return in, http.StatusBadRequest, err
	}
	if in.topologies, in.note, err = listTopologies(ctx, c); err != nil {
		return in, http.StatusBadGateway, err
	}
	if in.topology, err = pickTopology(in.topologies, q.Get("topology")); err != nil {
		return in, http.StatusBadRequest, err
	}
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, http.StatusBadGateway, err
	}
	pods, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		return in, http.StatusBadGateway, err
	}
	invs, err := c.aisched.AischedV1alpha1().GPUInventories().List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return in, http.StatusBadGateway, err
	}
	var inventories []aischedv1alpha1.GPUInventory
	if invs != nil {
		inventories = invs.Items
	}
	dra, err := listDRA(ctx, c.kube, metav1.ListOptions{})
	if err != nil {
		return in, http.StatusBadGateway, err
	}
	in.nodes = LayOutGPUs(nodes.Items, inventories, pods.Items, dra)
	return in, http.StatusOK, nil
}

// listTopologies lists the aischedtopologies, in name order, translated
// into the model. A user who may not list them gets the map by node and a
// note that says why; a cluster without their CRD has none.
func listTopologies(ctx context.Context, c *clients) ([]*topology.Topology, string, error) {
	list, err := c.aisched.AischedV1alpha1().AischedTopologies().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", nil
	case apierrors.IsForbidden(err):
		return nil, "Grouped by node: the topologies cannot be read (" + err.Error() + ").", nil
	case err != nil:
		return nil, "", err
	}
	out := make([]*topology.Topology, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, topology.OfAPI(&list.Items[i]))
	}
	// The apiserver lists cluster-scoped objects by name; the model's
	// order must not hang on that.
	slices.SortFunc(out, func(a, b *topology.Topology) int { return strings.Compare(a.Name, b.Name) })
	return out, "", nil
}

// pickTopology returns the topology named, the first when name is empty
// (nil when there is none).
func pickTopology(ts []*topology.Topology, name string) (*topology.Topology, error) {
	if name == "" {
		if len(ts) == 0 {
			return nil, nil
		}
		return ts[0], nil
	}
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		if t.Name == name {
			return t, nil
		}
		names = append(names, t.Name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("topology %q: there is no aischedtopology", name)
	}
	return nil, fmt.Errorf("topology %q: no such aischedtopology (there are %s)", name, strings.Join(names, ", "))
}
