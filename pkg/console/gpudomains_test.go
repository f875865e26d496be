package console

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/topology"
)

const (
	blockLabel = "example.com/block"
	rackLabel  = "example.com/rack"
)

// racksTopology is two levels: block, then rack.
func racksTopology() *topology.Topology {
	return topology.OfLabels("racks", "aischedtopology racks", []string{blockLabel, rackLabel})
}

// rackCluster is two blocks of two racks of two nodes of 4 cards (rack
// r4's cards are T4s, the rest A100s), a node of block b1 in no rack
// (b1-x) and a node in no block (loose), with:
//   - team-a/train-0 (group llm) holding all of b1-r1-0's cards whole, and
//     team-a/train-1 (group llm) cards 0 and 1 of b1-r1-1;
//   - team-b/infer a share (half) of card 0 of b2-r4-0;
//   - team-b/solo card 3 of loose whole.
func rackCluster(t *testing.T) []GPUNode {
	t.Helper()
	var nodes []corev1.Node
	var invs []aischedv1alpha1.GPUInventory
	add := func(name string, labels map[string]string, model string) {
		n := gpuNode(name)
		n.Labels = labels
		nodes = append(nodes, n)
		inv := inventory(name, 4)
		for i := range inv.Spec.GPUs {
			inv.Spec.GPUs[i].Model = model
		}
		invs = append(invs, inv)
	}
	for _, r := range []struct{ block, rack, model string }{
		{"b1", "r1", "NVIDIA-A100-SXM4-40GB"}, {"b1", "r2", "NVIDIA-A100-SXM4-40GB"},
		{"b2", "r3", "NVIDIA-A100-SXM4-40GB"}, {"b2", "r4", "Tesla-T4"},
	} {
		for i := range 2 {
			add(fmt.Sprintf("%s-%s-%d", r.block, r.rack, i), map[string]string{blockLabel: r.block, rackLabel: r.rack}, r.model)
		}
	}
	add("b1-x", map[string]string{blockLabel: "b1"}, "NVIDIA-A100-SXM4-40GB")
	add("loose", nil, "NVIDIA-A100-SXM4-40GB")

	inNamespace := func(p corev1.Pod, ns string) corev1.Pod { p.Namespace = ns; return p }
	train0 := inNamespace(gpuPod("train-0", "b1-r1-0", 4, "0,1,2,3", nil), "team-a")
	train1 := inNamespace(gpuPod("train-1", "b1-r1-1", 2, "0,1", nil), "team-a")
	for _, p := range []*corev1.Pod{&train0, &train1} {
		p.Labels = map[string]string{podgroup.NameLabel: "llm"}
	}
	pods := []corev1.Pod{
		train0, train1,
		inNamespace(gpuPod("infer", "b2-r4-0", 0, "0", map[string]string{gpu.MilliAnnotation: "500", gpu.GPUMemAnnotation: "4096"}), "team-b"),
		inNamespace(gpuPod("solo", "loose", 1, "3", nil), "team-b"),
	}
	return LayOutGPUs(nodes, invs, pods, DRAObjects{})
}

// outline writes domains a line each, indented by level: ID, name,
// nodes and counts.
func outline(ds []Domain) []string {
	var out []string
	var walk func(ds []Domain, depth int)
	walk = func(ds []Domain, depth int) {
		for _, d := range ds {
			c := d.Counts
			out = append(out, fmt.Sprintf("%s%s %q: %d nodes, %d cards: %d free, %d whole, %d shared",
				strings.Repeat("  ", depth), d.ID, d.Name, d.Nodes, c.Total, c.Free, c.Whole, c.Shared))
			walk(d.Domains, depth+1)
		}
	}
	walk(ds, 0)
	return out
}

func TestGroupGPUs(t *testing.T) {
	nodes := rackCluster(t)
	got := GroupGPUs(racksTopology(), nodes)
	want := []string{
		// r1: 4 + 2 cards held whole by train-0 and train-1.
		`b1 "b1": 5 nodes, 20 cards: 14 free, 6 whole, 0 shared`,
		`  b1/r1 "r1": 2 nodes, 8 cards: 2 free, 6 whole, 0 shared`,
		`  b1/r2 "r2": 2 nodes, 8 cards: 8 free, 0 whole, 0 shared`,
		`  b1/* "outside rack": 1 nodes, 4 cards: 4 free, 0 whole, 0 shared`,
		// r4: infer's half card is shared.
		`b2 "b2": 4 nodes, 16 cards: 15 free, 0 whole, 1 shared`,
		`  b2/r3 "r3": 2 nodes, 8 cards: 8 free, 0 whole, 0 shared`,
		`  b2/r4 "r4": 2 nodes, 8 cards: 7 free, 0 whole, 1 shared`,
		`* "outside block": 1 nodes, 4 cards: 3 free, 1 whole, 0 shared`,
	}
	if diff := cmp.Diff(want, outline(got)); diff != "" {
		t.Errorf("domains (-want,+got):\n%s", diff)
	}
	wantModels := []ModelCounts{
		{Model: "NVIDIA-A100-SXM4-40GB", Counts: CardCounts{Total: 8, Free: 8}},
		{Model: "Tesla-T4", Counts: CardCounts{Total: 8, Free: 7, Shared: 1}},
	}
	if diff := cmp.Diff(wantModels, got[1].Models); diff != "" {
		t.Errorf("block b2 by model (-want,+got):\n%s", diff)
	}
	if got[0].Level != "block" || got[0].Domains[0].Level != "rack" || !got[0].Domains[2].Outside || got[0].Domains[2].Domains != nil {
		t.Errorf("levels and outside group: %+v", got[0])
	}

	for _, tc := range []struct {
		id        string
		wantNodes []string
	}{
		{"b1/r1", []string{"b1-r1-0", "b1-r1-1"}},
		{"b1/*", []string{"b1-x"}},
		{"*", []string{"loose"}},
		{"b2", []string{"b2-r3-0", "b2-r3-1", "b2-r4-0", "b2-r4-1"}},
		{"b3", nil},
	} {
		var names []string
		for _, n := range NodesIn(racksTopology(), nodes, tc.id) {
			names = append(names, n.Name)
		}
		if diff := cmp.Diff(tc.wantNodes, names); diff != "" {
			t.Errorf("nodes in %s (-want,+got):\n%s", tc.id, diff)
		}
	}
}

func TestGPUFilter(t *testing.T) {
	nodes := rackCluster(t)
	for _, tc := range []struct {
		name   string
		filter GPUFilter
		want   []string
	}{{
		name:   "holder by namespace",
		filter: GPUFilter{Holder: "team-a/"},
		want: []string{
			`b1 "b1": 2 nodes, 6 cards: 0 free, 6 whole, 0 shared`,
			`  b1/r1 "r1": 2 nodes, 6 cards: 0 free, 6 whole, 0 shared`,
		},
	}, {
		// No pod is named llm: the group holds the cards.
		name:   "holder by pod group",
		filter: GPUFilter{Holder: "team-a/llm"},
		want: []string{
			`b1 "b1": 2 nodes, 6 cards: 0 free, 6 whole, 0 shared`,
			`  b1/r1 "r1": 2 nodes, 6 cards: 0 free, 6 whole, 0 shared`,
		},
	}, {
		name:   "holder of a share",
		filter: GPUFilter{Holder: "INFER"},
		want: []string{
			`b2 "b2": 1 nodes, 1 cards: 0 free, 0 whole, 1 shared`,
			`  b2/r4 "r4": 1 nodes, 1 cards: 0 free, 0 whole, 1 shared`,
		},
	}, {
		name:   "model",
		filter: GPUFilter{Model: "t4"},
		want: []string{
			`b2 "b2": 2 nodes, 8 cards: 7 free, 0 whole, 1 shared`,
			`  b2/r4 "r4": 2 nodes, 8 cards: 7 free, 0 whole, 1 shared`,
		},
	}, {
		name:   "node",
		filter: GPUFilter{Node: "r3-1"},
		want: []string{
			`b2 "b2": 1 nodes, 4 cards: 4 free, 0 whole, 0 shared`,
			`  b2/r3 "r3": 1 nodes, 4 cards: 4 free, 0 whole, 0 shared`,
		},
	}, {
		name:   "model and holder",
		filter: GPUFilter{Model: "a100", Holder: "team-b"},
		want:   []string{`* "outside block": 1 nodes, 1 cards: 0 free, 1 whole, 0 shared`},
	}, {
		name:   "nothing matches",
		filter: GPUFilter{Model: "h100"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := filterOf(map[string][]string{"node": {tc.filter.Node}, "model": {tc.filter.Model}, "holder": {tc.filter.Holder}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, outline(GroupGPUs(racksTopology(), f.Select(nodes)))); diff != "" {
				t.Errorf("domains (-want,+got):\n%s", diff)
			}
		})
	}
	if before := rackCluster(t); !cmp.Equal(outline(GroupGPUs(racksTopology(), before)), outline(GroupGPUs(racksTopology(), nodes))) {
		t.Error("Select changed the nodes it was given")
	}
	if _, err := filterOf(map[string][]string{"holder": {strings.Repeat("x", maxFilterLen+1)}}); err == nil || !strings.Contains(err.Error(), "holder:") {
		t.Errorf("an oversized holder filter: %v, want an error naming holder", err)
	}
}
