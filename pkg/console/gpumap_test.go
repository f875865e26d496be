package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
)

// Bounds of the GPU map's first answer on a cluster of 500 nodes of 8
// cards (4,000 cards): what a browser fetches before anything is opened.
const (
	// maxMapBytesTopology: grouped by a topology of 5 blocks of 5 racks,
	// the answer is the 30 domains' counts, by model.
	maxMapBytesTopology = 16 << 10
	// maxMapBytesNodes: without a topology, a line of counts per node and
	// no card.
	maxMapBytesNodes = 64 << 10
)

// bigCluster is 500 nodes of 8 A100s in 5 blocks of 5 racks of 20 nodes,
// each with a pod holding 4 cards whole, and a Topology of blocks and
// racks when withTopology.
func bigCluster(withTopology bool) []runtime.Object {
	var objs []runtime.Object
	for i := range 500 {
		name := fmt.Sprintf("gpu-node-%03d", i)
		n := gpuNode(name)
		n.Labels = map[string]string{blockLabel: fmt.Sprintf("block-%d", i/100), rackLabel: fmt.Sprintf("rack-%d", i/20)}
		inv := inventory(name, 8)
		p := gpuPod(fmt.Sprintf("job-%03d", i), name, 4, "0,1,2,3", nil)
		objs = append(objs, &n, &inv, &p)
	}
	if withTopology {
		objs = append(objs, &aischedv1alpha1.Topology{ObjectMeta: metav1.ObjectMeta{Name: "racks"},
			Spec: aischedv1alpha1.TopologySpec{Levels: []aischedv1alpha1.TopologyLevel{{NodeLabel: blockLabel}, {NodeLabel: rackLabel}}}})
	}
	return objs
}

// everyCardBytes is the size of the layout of every card of objs, what a
// map that lists each card would send.
func everyCardBytes(t *testing.T, objs []runtime.Object) int {
	t.Helper()
	var nodes []corev1.Node
	var invs []aischedv1alpha1.GPUInventory
	var pods []corev1.Pod
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Node:
			nodes = append(nodes, *o)
		case *aischedv1alpha1.GPUInventory:
			invs = append(invs, *o)
		case *corev1.Pod:
			pods = append(pods, *o)
		}
	}
	b, err := json.Marshal(LayOutGPUs(nodes, invs, pods, DRAObjects{}))
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

func decodeBody[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decoding %.200s: %v", body, err)
	}
	return v
}

// The first answer on 500 nodes and 4,000 cards stays small, counts every
// card, and lists none; a rack and a node open on asking.
func TestGPUMapLargeCluster(t *testing.T) {
	ts := newTestServer(t, bigCluster(true)...)
	sess := ts.signIn(t, "admin-token")
	w := ts.do(t, "GET", "/api/gpus", nil, sess, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /api/gpus: %d %s", w.Code, w.Body)
	}
	size := w.Body.Len()
	m := decodeBody[GPUMap](t, w.Body.Bytes())
	if want := (CardCounts{Total: 4000, Free: 2000, Whole: 2000}); m.Summary.Counts != want || m.Summary.Nodes != 500 {
		t.Errorf("summary %+v: want 500 nodes, %+v", m.Summary, want)
	}
	if m.Topology != "racks" || len(m.Domains) != 5 || len(m.Domains[0].Domains) != 5 || m.Domains[0].Nodes != 100 || m.Nodes != nil {
		t.Errorf("want 5 blocks of 5 racks and no node listed; got topology %q, %d domains", m.Topology, len(m.Domains))
	}
	if strings.Contains(w.Body.String(), `"uuid"`) || strings.Contains(w.Body.String(), "gpu-node-") {
		t.Error("the first answer lists nodes or cards")
	}
	t.Logf("first answer, by topology: %d bytes (bound %d); every card listed: %d bytes", size, maxMapBytesTopology, everyCardBytes(t, bigCluster(true)))
	if size > maxMapBytesTopology {
		t.Errorf("first answer by topology: %d bytes, over %d", size, maxMapBytesTopology)
	}

	w = ts.do(t, "GET", "/api/gpus/nodes?domain=block-1/rack-7", nil, sess, nil)
	rows := decodeBody[GPUNodes](t, w.Body.Bytes())
	if w.Code != http.StatusOK || len(rows.Nodes) != 20 || rows.Nodes[0].Name != "gpu-node-140" || rows.Nodes[0].Counts != (CardCounts{Total: 8, Free: 4, Whole: 4}) {
		t.Errorf("rack-7's nodes: %d, %d rows, first %+v; want gpu-node-140..159 with 4 of 8 cards held", w.Code, len(rows.Nodes), rows.Nodes)
	}
	w = ts.do(t, "GET", "/api/gpus/nodes/gpu-node-140", nil, sess, nil)
	node := decodeBody[GPUNode](t, w.Body.Bytes())
	if w.Code != http.StatusOK || len(node.Cards) != 8 || node.Cards[0].Whole != "ml/job-140" || node.Cards[7].State != CardFree {
		t.Errorf("gpu-node-140: %d %+v", w.Code, node)
	}
}

func TestGPUMapByNodeSize(t *testing.T) {
	ts := newTestServer(t, bigCluster(false)...)
	sess := ts.signIn(t, "admin-token")
	w := ts.do(t, "GET", "/api/gpus", nil, sess, nil)
	m := decodeBody[GPUMap](t, w.Body.Bytes())
	if w.Code != http.StatusOK || len(m.Nodes) != 500 || m.Domains != nil || m.Topology != "" {
		t.Fatalf("GET /api/gpus without a topology: %d, %d nodes, %d domains", w.Code, len(m.Nodes), len(m.Domains))
	}
	if strings.Contains(w.Body.String(), `"uuid"`) {
		t.Error("the first answer lists cards")
	}
	t.Logf("first answer, by node: %d bytes (bound %d)", w.Body.Len(), maxMapBytesNodes)
	if w.Body.Len() > maxMapBytesNodes {
		t.Errorf("first answer by node: %d bytes, over %d", w.Body.Len(), maxMapBytesNodes)
	}
}

func TestGPUMapRequests(t *testing.T) {
	all := bigCluster(true)
	objs := append(all[:3*20:3*20], all[len(all)-1]) // rack-0's 20 nodes, topology racks
	objs = append(objs, &aischedv1alpha1.Topology{ObjectMeta: metav1.ObjectMeta{Name: "blocks"},
		Spec: aischedv1alpha1.TopologySpec{Levels: []aischedv1alpha1.TopologyLevel{{NodeLabel: blockLabel}}}})
	ts := newTestServer(t, objs...)
	sess := ts.signIn(t, "admin-token")
	for _, tc := range []struct {
		name, path string
		wantCode   int
		wantBody   string
	}{
		{"the first topology by name", "/api/gpus", http.StatusOK, `"topologies":["blocks","racks"],"topology":"blocks"`},
		{"a topology asked for", "/api/gpus?topology=blocks&model=a100", http.StatusOK, `"filter":{"model":"a100"}`},
		{"an unknown topology", "/api/gpus?topology=zones", http.StatusBadRequest, `topology \"zones\": no such aischedtopology (there are blocks, racks)`},
		{"a filter too long", "/api/gpus/nodes?node=" + strings.Repeat("n", 300), http.StatusBadRequest, "node: 300 characters, at most 253"},
		{"a domain", "/api/gpus/nodes?domain=block-0", http.StatusOK, `"name":"gpu-node-019"`},
		{"a domain of another topology", "/api/gpus/nodes?topology=racks&domain=block-0/rack-0", http.StatusOK, `"name":"gpu-node-019"`},
		{"a domain without a topology's level", "/api/gpus/nodes?domain=block-0/rack-0", http.StatusNotFound, `domain \"block-0/rack-0\": no GPU node of topology blocks is there`},
		{"a domain the filter empties", "/api/gpus/nodes?domain=block-0&holder=team-z", http.StatusNotFound, `no GPU node of topology blocks is there matching holder ~ \"team-z\"`},
		{"no domain: every node", "/api/gpus/nodes?holder=job-007", http.StatusOK, `{"nodes":[{"name":"gpu-node-007","ready":true,"source":"GPUInventory","counts":{"total":4,"free":0,"whole":4,"shared":0}}]}`},
		{"a node's cards by holder", "/api/gpus/nodes/gpu-node-003?holder=ml/", http.StatusOK, `"index":3,`},
		{"a node the filter empties", "/api/gpus/nodes/gpu-node-003?model=t4", http.StatusNotFound, `node gpu-node-003: no card matching model ~ \"t4\"`},
		{"a node that is not there", "/api/gpus/nodes/gpu-node-999", http.StatusNotFound, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ts.do(t, "GET", tc.path, nil, sess, nil)
			if w.Code != tc.wantCode || !strings.Contains(w.Body.String(), tc.wantBody) {
				t.Errorf("GET %.80s: %d %.600s\nwant %d and %s", tc.path, w.Code, w.Body, tc.wantCode, tc.wantBody)
			}
		})
	}
	// The holder filter keeps the cards of ml/job-003 alone.
	w := ts.do(t, "GET", "/api/gpus/nodes/gpu-node-003?holder=ml/", nil, sess, nil)
	var indices []int
	for _, c := range decodeBody[GPUNode](t, w.Body.Bytes()).Cards {
		indices = append(indices, c.Index)
	}
	if diff := cmp.Diff([]int{0, 1, 2, 3}, indices); diff != "" {
		t.Errorf("cards of gpu-node-003 held in ml (-want,+got):\n%s", diff)
	}
}

// A user who may list nodes and pods but not topologies gets the map by
// node, told why.
func TestGPUMapTopologiesForbidden(t *testing.T) {
	ts := newTestServer(t, bigCluster(true)[:3]...)
	ts.aisched.PrependReactor("list", "aischedtopologies", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(aischedv1alpha1.SchemeGroupVersion.WithResource("aischedtopologies").GroupResource(), "", nil)
	})
	sess := ts.signIn(t, "admin-token")
	w := ts.do(t, "GET", "/api/gpus", nil, sess, nil)
	m := decodeBody[GPUMap](t, w.Body.Bytes())
	if w.Code != http.StatusOK || len(m.Nodes) != 1 || m.Topology != "" || !strings.Contains(m.Note, "Grouped by node") || !strings.Contains(m.Note, "forbidden") {
		t.Errorf("map without rights to topologies: %d %s", w.Code, w.Body)
	}
}
