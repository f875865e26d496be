package topology

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/util/crdwatch"
	"github.com/aisched/aisched/pkg/util/quote"
)

// Peers' forms, one translator each into the model. Where each comes
// from (docs/topology.md lists them with their sources):
//
//   - Kueue's Topology Aware Scheduling: the pod template's annotations
//     kueue.x-k8s.io/podset-*-topology, with the levels of Kueue's
//     Topologies (kueue.x-k8s.io, spec.levels[].nodeLabel);
//   - KAI-Scheduler's: the annotations kai.scheduler/topology,
//     topology-required-placement, topology-preferred-placement and the
//     segment-* ones, with KAI's Topologies (kai.scheduler/v1alpha1);
//   - Volcano's: a PodGroup's spec.networkTopology (and subGroupPolicy),
//     with its HyperNodes (topology.volcano.sh/v1alpha1);
//   - Koordinator's: the annotation
//     gang.scheduling.koordinator.sh/network-topology-spec (gather
//     strategies by layer), with its ClusterNetworkTopology
//     (scheduling.koordinator.sh/v1alpha1).

// Kueue's annotations.
const (
	KueueRequired         = "kueue.x-k8s.io/podset-required-topology"
	KueuePreferred        = "kueue.x-k8s.io/podset-preferred-topology"
	KueueUnconstrained    = "kueue.x-k8s.io/podset-unconstrained-topology"
	KueueSliceRequired    = "kueue.x-k8s.io/podset-slice-required-topology"
	KueueSliceSize        = "kueue.x-k8s.io/podset-slice-size"
	KueueSliceConstraints = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
	KueuePodSetGroupName  = "kueue.x-k8s.io/podset-group-name"
)

// The prefixes of peers' topologies' names in the model, and the name of
// Volcano's one.
const (
	kueuePrefix         = "kueue/"
	kaiPrefix           = "kai/"
	koordinatorPrefix   = "koordinator/"
	volcanoTopologyName = "volcano"
)

// Koordinator's forms: the annotation of a gang's gather strategies, its
// strategies, and the node layer, which names no label.
const (
	KoordinatorNetworkTopologySpec = "gang.scheduling.koordinator.sh/network-topology-spec"
	koordinatorMustGather          = "MustGather"
	koordinatorPreferGather        = "PreferGather"
	koordinatorNodeLayer           = "NodeTopologyLayer"
	hostnameLabel                  = "kubernetes.io/hostname"
)

// KAI-Scheduler's annotations.
const (
	KAITopology         = "kai.scheduler/topology"
	KAIRequired         = "kai.scheduler/topology-required-placement"
	KAIPreferred        = "kai.scheduler/topology-preferred-placement"
	KAISegmentSize      = "kai.scheduler/segment-size"
	KAISegmentRequired  = "kai.scheduler/segment-topology-required-placement"
	KAISegmentPreferred = "kai.scheduler/segment-topology-preferred-placement"
)

// ofKueue reads Kueue's annotations: podset-required-topology is the
// required level, podset-preferred-topology the preferred one (Kueue
// takes one of the two), podset-unconstrained-topology asks nothing of
// the place, podset-slice-required-topology with podset-slice-size (or a
// one-layer podset-slice-required-topology-constraints) are slices.
// podset-group-name, which ties two pod sets, is refused: aisched places
// one pod group at a time.
func ofKueue(a map[string]string, where string) (Constraint, bool, error) {
	key := func(k string) string { return where + " " + k }
	req, hasReq := a[KueueRequired]
	pref, hasPref := a[KueuePreferred]
	sliceLevel, hasSlice := a[KueueSliceRequired]
	sliceSize, hasSize := a[KueueSliceSize]
	layers, hasLayers := a[KueueSliceConstraints]
	unconstrained, hasUnconstrained := a[KueueUnconstrained]
	group, hasGroup := a[KueuePodSetGroupName]
	if !hasReq && !hasPref && !hasSlice && !hasSize && !hasLayers && !hasUnconstrained && !hasGroup {
		return Constraint{}, false, nil
	}
	c := Constraint{Required: strings.TrimSpace(req), Preferred: strings.TrimSpace(pref), SliceLevel: strings.TrimSpace(sliceLevel),
		RequiredKey: key(KueueRequired), PreferredKey: key(KueuePreferred), SliceKey: key(KueueSliceRequired)}
	switch {
	case hasGroup:
		return Constraint{}, true, fmt.Errorf("%s=%s: not supported: aisched places one pod group at a time; put the pods in one group", key(KueuePodSetGroupName), quote.Value(group))
	case hasReq && hasPref:
		return Constraint{}, true, fmt.Errorf("%s and %s: Kueue takes one of the two; keep one", key(KueueRequired), key(KueuePreferred))
	case hasUnconstrained && (hasReq || hasPref):
		return Constraint{}, true, fmt.Errorf("%s=%s and %s: an unconstrained pod set asks for no level; keep one", key(KueueUnconstrained), quote.Value(unconstrained), c.RequiredKey)
	case hasUnconstrained && strings.TrimSpace(unconstrained) != "true" && strings.TrimSpace(unconstrained) != "false":
		return Constraint{}, true, fmt.Errorf("%s=%s: want true or false", key(KueueUnconstrained), quote.Value(unconstrained))
	case hasSize && !hasSlice:
		return Constraint{}, true, fmt.Errorf("%s needs %s", key(KueueSliceSize), key(KueueSliceRequired))
	case hasSlice && !hasSize:
		return Constraint{}, true, fmt.Errorf("%s needs %s, the members of a slice", key(KueueSliceRequired), key(KueueSliceSize))
	case hasLayers && hasSlice:
		return Constraint{}, true, fmt.Errorf("%s and %s: keep one", key(KueueSliceConstraints), key(KueueSliceRequired))
	}
	for _, l := range []struct{ k, v string }{{KueueRequired, c.Required}, {KueuePreferred, c.Preferred}, {KueueSliceRequired, c.SliceLevel}} {
		if _, set := a[l.k]; set {
			if err := checkLevel(key(l.k), l.v); err != nil {
				return Constraint{}, true, err
			}
		}
	}
	if hasSize {
		n, err := sliceSizeOf(key(KueueSliceSize), sliceSize)
		if err != nil {
			return Constraint{}, true, err
		}
		c.SliceSize = n
	}
	if hasLayers {
		var list []struct {
			Topology string `json:"topology"`
			Size     int    `json:"size"`
		}
		if err := json.Unmarshal([]byte(layers), &list); err != nil || len(list) == 0 {
			return Constraint{}, true, fmt.Errorf("%s=%s: want a JSON list of {\"topology\": level, \"size\": members}", key(KueueSliceConstraints), quote.Value(layers))
		}
		if len(list) > 1 {
			return Constraint{}, true, fmt.Errorf("%s: %d slice layers: not supported: aisched keeps one slice level; give one", key(KueueSliceConstraints), len(list))
		}
		if err := checkLevel(key(KueueSliceConstraints), list[0].Topology); err != nil {
			return Constraint{}, true, err
		}
		n, err := sliceSizeOf(key(KueueSliceConstraints)+" size", strconv.Itoa(list[0].Size))
		if err != nil {
			return Constraint{}, true, err
		}
		c.SliceLevel, c.SliceSize, c.SliceKey = list[0].Topology, n, key(KueueSliceConstraints)
	}
	if c.Empty() {
		// An unconstrained pod set: placed anywhere, as without Kueue.
		return Constraint{}, false, nil
	}
	return c, true, nil
}

// ofKAI reads KAI-Scheduler's annotations: kai.scheduler/topology names
// the Topology (KAI's, "kai/<name>" in the model), topology-required- and
// topology-preferred-placement are the levels, and segment-size with
// segment-topology-required-placement are slices. A segment's preferred
// level alone is refused: aisched's slices are required.
func ofKAI(a map[string]string, where string) (Constraint, bool, error) {
	key := func(k string) string { return where + " " + k }
	topo, hasTopo := a[KAITopology]
	req, hasReq := a[KAIRequired]
	pref, hasPref := a[KAIPreferred]
	size, hasSize := a[KAISegmentSize]
	segReq, hasSegReq := a[KAISegmentRequired]
	segPref, hasSegPref := a[KAISegmentPreferred]
	if !hasTopo && !hasReq && !hasPref && !hasSize && !hasSegReq && !hasSegPref {
		return Constraint{}, false, nil
	}
	c := Constraint{Required: strings.TrimSpace(req), Preferred: strings.TrimSpace(pref), SliceLevel: strings.TrimSpace(segReq),
		TopologyKey: key(KAITopology), RequiredKey: key(KAIRequired), PreferredKey: key(KAIPreferred), SliceKey: key(KAISegmentRequired)}
	switch {
	case !hasTopo:
		return Constraint{}, true, fmt.Errorf("%s needs %s, the name of the Topology", keyOf(c), key(KAITopology))
	case hasSegPref && !hasSegReq:
		return Constraint{}, true, fmt.Errorf("%s=%s: not supported: aisched's slices are required; use %s", key(KAISegmentPreferred), quote.Value(segPref), KAISegmentRequired)
	case hasSize != hasSegReq:
		return Constraint{}, true, fmt.Errorf("%s and %s go together", key(KAISegmentSize), key(KAISegmentRequired))
	}
	if msgs := validationName(topo); msgs != "" {
		return Constraint{}, true, fmt.Errorf("%s=%s: %s", key(KAITopology), quote.Value(topo), msgs)
	}
	c.Topology = kaiPrefix + strings.TrimSpace(topo)
	for _, l := range []struct{ k, v string }{{KAIRequired, c.Required}, {KAIPreferred, c.Preferred}, {KAISegmentRequired, c.SliceLevel}} {
		if _, set := a[l.k]; set {
			if err := checkLevel(key(l.k), l.v); err != nil {
				return Constraint{}, true, err
			}
		}
	}
	if hasSize {
		n, err := sliceSizeOf(key(KAISegmentSize), size)
		if err != nil {
			return Constraint{}, true, err
		}
		c.SliceSize = n
	}
	if c.Empty() {
		return Constraint{}, true, fmt.Errorf("%s=%s names a topology but no level: add %s or %s", key(KAITopology), quote.Value(topo), KAIRequired, KAIPreferred)
	}
	return c, true, nil
}

// ofKoordinator reads Koordinator's gather strategies: every MustGather
// layer is required (the finest binds), every PreferGather layer is
// preferred (the finest is tried first, then each coarser level). Layers
// are the topologyLayer names of a ClusterNetworkTopology.
func ofKoordinator(a map[string]string, where string) (Constraint, bool, error) {
	v, ok := a[KoordinatorNetworkTopologySpec]
	if !ok {
		return Constraint{}, false, nil
	}
	key := where + " " + KoordinatorNetworkTopologySpec
	var spec struct {
		GatherStrategy []struct {
			Layer    string `json:"layer"`
			Strategy string `json:"strategy"`
		} `json:"gatherStrategy"`
	}
	if err := json.Unmarshal([]byte(v), &spec); err != nil || len(spec.GatherStrategy) == 0 {
		return Constraint{}, true, fmt.Errorf("%s=%s: want a JSON object with gatherStrategy: [{\"layer\": ..., \"strategy\": MustGather or PreferGather}]", key, quote.Value(v))
	}
	c := Constraint{RequiredKey: key, PreferredKey: key}
	var must, prefer []string
	for i, g := range spec.GatherStrategy {
		layer := strings.TrimSpace(g.Layer)
		if layer == "" || len(layer) > 63 || strings.ContainsAny(layer, ", ") {
			return Constraint{}, true, fmt.Errorf("%s: gatherStrategy[%d].layer=%s: want a layer's name", key, i, quote.Value(g.Layer))
		}
		switch g.Strategy {
		case koordinatorMustGather:
			must = append(must, layer)
		case koordinatorPreferGather:
			prefer = append(prefer, layer)
		default:
			return Constraint{}, true, fmt.Errorf("%s: gatherStrategy[%d].strategy=%s: want MustGather or PreferGather", key, i, quote.Value(g.Strategy))
		}
	}
	c.Required, c.Preferred = strings.Join(must, ","), strings.Join(prefer, ",")
	return c, true, nil
}

// ofVolcano reads a Volcano PodGroup's spec: networkTopology in mode hard
// is required inside one HyperNode of tier highestTierAllowed (or the
// tier named highestTierName), the lowest tier tried first, as Volcano
// does; in mode soft, the lowest tier is preferred and nothing required.
// One subGroupPolicy with a hard networkTopology and a subGroupSize is
// slices. Errors name the field.
func ofVolcano(spec map[string]interface{}) (Constraint, bool, error) {
	nt, hasNT, _ := unstructured.NestedMap(spec, "networkTopology")
	policies, hasPolicies, _ := unstructured.NestedSlice(spec, "subGroupPolicy")
	var withTopology []map[string]interface{}
	for _, p := range policies {
		if m, ok := p.(map[string]interface{}); ok {
			if _, ok := m["networkTopology"]; ok {
				withTopology = append(withTopology, m)
			}
		}
	}
	if !hasNT && (!hasPolicies || len(withTopology) == 0) {
		return Constraint{}, false, nil
	}
	c := Constraint{Topology: volcanoTopologyName, TopologyKey: "spec.networkTopology"}
	if hasNT {
		level, hard, err := volcanoTier(nt, "spec.networkTopology")
		if err != nil {
			return Constraint{}, true, err
		}
		c.PreferFinest, c.RequiredKey, c.PreferredKey = true, "spec.networkTopology", "spec.networkTopology"
		if hard {
			c.Required = level
		}
	}
	switch {
	case len(withTopology) > 1:
		return Constraint{}, true, fmt.Errorf("spec.subGroupPolicy: %d policies with a networkTopology: not supported: aisched keeps one slice level", len(withTopology))
	case len(withTopology) == 1:
		p := withTopology[0]
		ntp, _, _ := unstructured.NestedMap(p, "networkTopology")
		level, hard, err := volcanoTier(ntp, "spec.subGroupPolicy[].networkTopology")
		if err != nil {
			return Constraint{}, true, err
		}
		if !hard {
			return Constraint{}, true, fmt.Errorf("spec.subGroupPolicy[].networkTopology.mode=soft: not supported: aisched's slices are required; use hard")
		}
		size, ok := number(p, "subGroupSize")
		if !ok || size < 1 || size > MaxSliceSize {
			return Constraint{}, true, fmt.Errorf("spec.subGroupPolicy[].subGroupSize: want the members of a subgroup, 1 to %d", MaxSliceSize)
		}
		c.SliceLevel, c.SliceSize, c.SliceKey = level, int(size), "spec.subGroupPolicy[].networkTopology"
	}
	return c, true, nil
}

// volcanoTier reads a networkTopology: the level of its highest tier
// (its number, or highestTierName), and whether it is hard.
func volcanoTier(nt map[string]interface{}, field string) (string, bool, error) {
	mode, _, _ := unstructured.NestedString(nt, "mode")
	if mode == "" {
		mode = "hard"
	}
	if mode != "hard" && mode != "soft" {
		return "", false, fmt.Errorf("%s.mode=%s: want hard or soft", field, quote.Value(mode))
	}
	name, _, _ := unstructured.NestedString(nt, "highestTierName")
	tier, hasTier := number(nt, "highestTierAllowed")
	switch {
	case name != "" && hasTier:
		return "", false, fmt.Errorf("%s: highestTierAllowed and highestTierName: keep one", field)
	case name != "":
		return name, mode == "hard", nil
	case hasTier && (tier < 0 || tier > 1000):
		return "", false, fmt.Errorf("%s.highestTierAllowed=%v: want a tier from 0 to 1000", field, tier)
	case !hasTier:
		// Volcano's CRD defaults it to 1.
		tier = 1
	}
	return strconv.Itoa(int(tier)), mode == "hard", nil
}

// number reads a JSON number of an unstructured map.
func number(m map[string]interface{}, field string) (int64, bool) {
	switch v := m[field].(type) {
	case int64:
		return v, true
	case float64:
		return int64(v), v == float64(int64(v))
	case int:
		return int64(v), true
	}
	return 0, false
}

// validationName checks a Topology's name; "" when it is good.
func validationName(name string) string {
	if msgs := validation.IsDNS1123Subdomain(strings.TrimSpace(name)); len(msgs) > 0 {
		return msgs[0]
	}
	return ""
}

// The peers' topology resources.
var (
	kueueTopologies = []schema.GroupVersionResource{
		{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "topologies"},
		{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "topologies"},
		{Group: "kueue.x-k8s.io", Version: "v1alpha1", Resource: "topologies"},
	}
	kaiTopologies            = schema.GroupVersionResource{Group: "kai.scheduler", Version: "v1alpha1", Resource: "topologies"}
	koordinatorTopologies    = schema.GroupVersionResource{Group: "scheduling.koordinator.sh", Version: "v1alpha1", Resource: "clusternetworktopologies"}
	volcanoHyperNodeResource = schema.GroupVersionResource{Group: "topology.volcano.sh", Version: "v1alpha1", Resource: "hypernodes"}
)

// peerStores are the informers' stores of the peers' topologies; nil where
// the CRD is not served.
type peerStores struct {
	kueue, kai, koordinator, volcano cache.Indexer
	nodes                            corelisters.NodeLister
}

// startPeers follows the peers' topologies whose CRDs are served.
func (s *Source) startPeers(ctx context.Context, client versioned.Interface, dyn dynamic.Interface, changed cache.ResourceEventHandlerFuncs) error {
	if dyn == nil {
		return nil
	}
	start := func(into *cache.Indexer, gvr schema.GroupVersionResource) (bool, error) {
		informer, err := crdwatch.StartDynamic(ctx, client.Discovery(), dyn, gvr, syncTimeout, changed)
		if err != nil || informer == nil {
			return false, err
		}
		*into = informer.GetIndexer()
		klog.FromContext(ctx).Info("Reading peers' topologies", "resource", gvr)
		return true, nil
	}
	for _, gvr := range kueueTopologies {
		if ok, err := start(&s.peers.kueue, gvr); err != nil || ok {
			if err != nil {
				return err
			}
			break
		}
	}
	for _, p := range []struct {
		into *cache.Indexer
		gvr  schema.GroupVersionResource
	}{{&s.peers.kai, kaiTopologies}, {&s.peers.koordinator, koordinatorTopologies}, {&s.peers.volcano, volcanoHyperNodeResource}} {
		if _, err := start(p.into, p.gvr); err != nil {
			return err
		}
	}
	return nil
}

// peerTopologies translates the peers' topologies into the model, in
// name order.
func (s *Source) peerTopologies() []*Topology {
	var out []*Topology
	for _, p := range []struct {
		store     cache.Indexer
		translate func(*unstructured.Unstructured) *Topology
	}{{s.peers.kueue, kueueTopology}, {s.peers.kai, kaiTopology}, {s.peers.koordinator, koordinatorTopology}} {
		if p.store == nil {
			continue
		}
		var list []*Topology
		for _, obj := range p.store.List() {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				if t := p.translate(u); t != nil {
					list = append(list, t)
				}
			}
		}
		slices.SortFunc(list, func(a, b *Topology) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, list...)
	}
	if s.peers.volcano != nil && s.peers.nodes != nil {
		var hyper []*unstructured.Unstructured
		for _, obj := range s.peers.volcano.List() {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				hyper = append(hyper, u)
			}
		}
		nodes, _ := s.peers.nodes.List(labels.Everything())
		names := make(map[string]map[string]string, len(nodes))
		for _, n := range nodes {
			names[n.Name] = n.Labels
		}
		if t := VolcanoTopology(hyper, names); t != nil {
			out = append(out, t)
		}
	}
	return out
}

// levelLabels reads spec.levels[].nodeLabel (and alias) of Kueue's and
// KAI's Topologies; nil when a level has no label.
func levelLabels(u *unstructured.Unstructured) ([]string, []string) {
	levels, _, _ := unstructured.NestedSlice(u.Object, "spec", "levels")
	var labels, aliases []string
	for _, l := range levels[:min(len(levels), MaxLevels)] {
		m, ok := l.(map[string]interface{})
		if !ok {
			return nil, nil
		}
		label, _, _ := unstructured.NestedString(m, "nodeLabel")
		alias, _, _ := unstructured.NestedString(m, "alias")
		if label == "" {
			return nil, nil
		}
		labels, aliases = append(labels, label), append(aliases, alias)
	}
	return labels, aliases
}

// kueueTopology translates Kueue's Topology: its levels' node labels.
func kueueTopology(u *unstructured.Unstructured) *Topology {
	labels, _ := levelLabels(u)
	if len(labels) == 0 {
		return nil
	}
	return OfLabels(kueuePrefix+u.GetName(), "Kueue Topology "+u.GetName(), labels)
}

// kaiTopology translates KAI's Topology: its levels' node labels, each
// also named by its alias.
func kaiTopology(u *unstructured.Unstructured) *Topology {
	labels, aliases := levelLabels(u)
	if len(labels) == 0 {
		return nil
	}
	t := OfLabels(kaiPrefix+u.GetName(), "KAI Topology "+u.GetName(), labels)
	for i := range t.Levels {
		if aliases[i] != "" {
			t.Levels[i].Alias, t.Levels[i].Name = aliases[i], aliases[i]
		}
	}
	return t
}

// koordinatorTopology translates Koordinator's ClusterNetworkTopology:
// spec.networkTopologySpec lists layers, each with its parent layer and
// node labels (the first is read); the levels are the layers from the one
// without a parent down, named by their topologyLayer. The node layer,
// which has no label, reads kubernetes.io/hostname.
func koordinatorTopology(u *unstructured.Unstructured) *Topology {
	list, _, _ := unstructured.NestedSlice(u.Object, "spec", "networkTopologySpec")
	type layer struct{ name, parent, label string }
	children := map[string]layer{}
	var root *layer
	for _, item := range list {
		m, ok := item.(map[string]interface{})
		if !ok {
			return nil
		}
		var l layer
		l.name, _, _ = unstructured.NestedString(m, "topologyLayer")
		l.parent, _, _ = unstructured.NestedString(m, "parentTopologyLayer")
		keys, _, _ := unstructured.NestedStringSlice(m, "labelKey")
		if len(keys) > 0 {
			l.label = keys[0]
		} else if l.name == koordinatorNodeLayer {
			l.label = hostnameLabel
		}
		if l.name == "" || l.label == "" {
			return nil
		}
		if l.parent == "" {
			if root != nil {
				return nil
			}
			root = &l
			continue
		}
		children[l.parent] = l
	}
	if root == nil {
		return nil
	}
	t := &Topology{Name: koordinatorPrefix + u.GetName(), Object: "Koordinator ClusterNetworkTopology " + u.GetName()}
	for l := *root; len(t.Levels) < MaxLevels; {
		t.Levels = append(t.Levels, Level{Key: l.name, Label: l.label, Name: l.name})
		next, ok := children[l.name]
		if !ok {
			break
		}
		l = next
	}
	return t
}

// VolcanoTopology translates Volcano's HyperNodes into one topology named
// "volcano": a level per tier, the highest first, named by the tier's
// number (and its tierName); a node's domain at a tier is the HyperNode of
// that tier that holds it, directly or through its member HyperNodes.
// Members are matched by exactMatch, regexMatch or labelMatch; nodes are
// by name with their labels. Nil without HyperNodes.
func VolcanoTopology(hyperNodes []*unstructured.Unstructured, nodes map[string]map[string]string) *Topology {
	if len(hyperNodes) == 0 {
		return nil
	}
	type hyper struct {
		name     string
		tier     int64
		nodes    []string
		children []string
	}
	all := map[string]*hyper{}
	tierNames := map[int64]string{}
	for _, u := range hyperNodes {
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		tier, _ := number(spec, "tier")
		h := &hyper{name: u.GetName(), tier: tier}
		if n, _, _ := unstructured.NestedString(u.Object, "spec", "tierName"); n != "" {
			tierNames[tier] = n
		}
		all[h.name] = h
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	hyperNames := make([]string, 0, len(all))
	for n := range all {
		hyperNames = append(hyperNames, n)
	}
	slices.Sort(hyperNames)
	for _, u := range hyperNodes {
		h := all[u.GetName()]
		members, _, _ := unstructured.NestedSlice(u.Object, "spec", "members")
		for _, m := range members {
			mm, ok := m.(map[string]interface{})
			if !ok {
				continue
			}
			kind, _, _ := unstructured.NestedString(mm, "type")
			sel, _, _ := unstructured.NestedMap(mm, "selector")
			candidates := names
			if kind == "HyperNode" {
				candidates = hyperNames
			}
			for _, name := range matching(sel, candidates, nodes, kind == "HyperNode") {
				if kind == "HyperNode" {
					h.children = append(h.children, name)
				} else {
					h.nodes = append(h.nodes, name)
				}
			}
		}
	}
	var tiers []int64
	for _, h := range all {
		if !slices.Contains(tiers, h.tier) {
			tiers = append(tiers, h.tier)
		}
	}
	slices.Sort(tiers)
	slices.Reverse(tiers)
	levelOf := map[int64]int{}
	var levels []Level
	for i, tier := range tiers {
		levelOf[tier] = i
		levels = append(levels, Level{Key: strconv.FormatInt(tier, 10), Name: "tier " + strconv.FormatInt(tier, 10), Alias: tierNames[tier]})
	}
	members := map[string][]string{}
	var walk func(h *hyper, top *hyper, depth int)
	walk = func(h *hyper, top *hyper, depth int) {
		if depth > MaxLevels*4 {
			return // a cycle
		}
		for _, n := range h.nodes {
			ds := members[n]
			if ds == nil {
				ds = make([]string, len(levels))
				members[n] = ds
			}
			if i := levelOf[top.tier]; ds[i] == "" {
				ds[i] = top.name
			}
		}
		for _, c := range h.children {
			if child := all[c]; child != nil && child != h {
				walk(child, top, depth+1)
			}
		}
	}
	for _, name := range hyperNames {
		walk(all[name], all[name], 0)
	}
	return OfMembers(volcanoTopologyName, "Volcano's HyperNodes", levels, members)
}

// matching returns the candidates a HyperNode member's selector matches:
// exactMatch.name, regexMatch.pattern, or (for nodes) labelMatch.
func matching(sel map[string]interface{}, candidates []string, nodes map[string]map[string]string, hyper bool) []string {
	if name, ok, _ := unstructured.NestedString(sel, "exactMatch", "name"); ok {
		if slices.Contains(candidates, name) {
			return []string{name}
		}
		return nil
	}
	if pattern, ok, _ := unstructured.NestedString(sel, "regexMatch", "pattern"); ok {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil
		}
		var out []string
		for _, c := range candidates {
			if re.MatchString(c) {
				out = append(out, c)
			}
		}
		return out
	}
	if lm, ok, _ := unstructured.NestedMap(sel, "labelMatch"); ok && !hyper {
		var ls metav1.LabelSelector
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(lm, &ls); err != nil {
			return nil
		}
		selector, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil || selector.Empty() {
			return nil
		}
		var out []string
		for _, c := range candidates {
			if selector.Matches(labels.Set(nodes[c])) {
				out = append(out, c)
			}
		}
		return out
	}
	return nil
}
