package gpuledger

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
)

func TestCollector(t *testing.T) {
	s := NewStandalone(Options{})
	s.ObserveNode(gpuNode("a", "4", nil))
	s.ObserveInventory(inventory("a", 16384, 16384, 16384, 16384))
	s.ObserveNode(gpuNode("cpu", "0", nil))
	s.Assign(types.UID("whole"), "a", []int{0, 1}, Share{})
	s.Assign(types.UID("share-1"), "a", []int{2}, Share{Milli: 300})
	s.Assign(types.UID("share-2"), "a", []int{2}, Share{Milli: 200})
	want := `
# HELP aisched_gpu_cards [ALPHA] GPU cards by node, model and state: allocated (held whole), shared (held in part by pods sharing it), free; cards of another scheduler's pods count once the node agent located them.
# TYPE aisched_gpu_cards gauge
aisched_gpu_cards{model="X",node="a",state="allocated"} 2
aisched_gpu_cards{model="X",node="a",state="free"} 1
aisched_gpu_cards{model="X",node="a",state="shared"} 1
# HELP aisched_gpu_fragmented_milli [ALPHA] Thousandths of a card free on cards that pods share, by node: capacity that whole-card pods cannot use until the shares end.
# TYPE aisched_gpu_fragmented_milli gauge
aisched_gpu_fragmented_milli{node="a"} 500
`
	if err := testutil.CustomCollectAndCompare(s.Collector(), strings.NewReader(want), "aisched_gpu_cards", "aisched_gpu_fragmented_milli"); err != nil {
		t.Error(err)
	}
	s.Release(types.UID("whole"), "")
	s.Release(types.UID("share-1"), "")
	s.Release(types.UID("share-2"), "")
	want = `
# HELP aisched_gpu_cards [ALPHA] GPU cards by node, model and state: allocated (held whole), shared (held in part by pods sharing it), free; cards of another scheduler's pods count once the node agent located them.
# TYPE aisched_gpu_cards gauge
aisched_gpu_cards{model="X",node="a",state="free"} 4
# HELP aisched_gpu_fragmented_milli [ALPHA] Thousandths of a card free on cards that pods share, by node: capacity that whole-card pods cannot use until the shares end.
# TYPE aisched_gpu_fragmented_milli gauge
aisched_gpu_fragmented_milli{node="a"} 0
`
	if err := testutil.CustomCollectAndCompare(s.Collector(), strings.NewReader(want), "aisched_gpu_cards", "aisched_gpu_fragmented_milli"); err != nil {
		t.Errorf("after every pod left: %v", err)
	}
}

// A share of each of two cards makes both cards shared.
func TestCollectorMultiCardShare(t *testing.T) {
	s := NewStandalone(Options{})
	s.ObserveNode(gpuNode("a", "4", nil))
	s.ObserveInventory(inventory("a", 16384, 16384, 16384, 16384))
	s.Assign(types.UID("default-use"), "a", []int{1, 3}, Share{Milli: 300, MemMiB: 3000})
	want := `
# HELP aisched_gpu_cards [ALPHA] GPU cards by node, model and state: allocated (held whole), shared (held in part by pods sharing it), free; cards of another scheduler's pods count once the node agent located them.
# TYPE aisched_gpu_cards gauge
aisched_gpu_cards{model="X",node="a",state="free"} 2
aisched_gpu_cards{model="X",node="a",state="shared"} 2
# HELP aisched_gpu_fragmented_milli [ALPHA] Thousandths of a card free on cards that pods share, by node: capacity that whole-card pods cannot use until the shares end.
# TYPE aisched_gpu_fragmented_milli gauge
aisched_gpu_fragmented_milli{node="a"} 1400
`
	if err := testutil.CustomCollectAndCompare(s.Collector(), strings.NewReader(want), "aisched_gpu_cards", "aisched_gpu_fragmented_milli"); err != nil {
		t.Error(err)
	}
}

// MIG devices are counted by their card's model and their profile: the
// static ones allocated or free, the dynamic placements only while a
// claim holds one; their cards count as shared.
func TestCollectorMIG(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts nvidiadra.Options
		held string
		want string
	}{{
		name: "static", opts: nvidiadra.Options{MIG: []string{"3g.40gb", "1g.10gb", "1g.10gb"}}, held: "gpu-1-mig-1g10gb-19-4",
		want: `
aisched_gpu_mig_devices{model="NVIDIA A100-SXM4-80GB",node="n1",profile="1g.10gb",state="allocated"} 1
aisched_gpu_mig_devices{model="NVIDIA A100-SXM4-80GB",node="n1",profile="1g.10gb",state="free"} 3
aisched_gpu_mig_devices{model="NVIDIA A100-SXM4-80GB",node="n1",profile="3g.40gb",state="free"} 2
`,
	}, {
		// Of the 19 placements per card, none is counted free.
		name: "dynamic", opts: nvidiadra.Options{DynamicMIG: true}, held: "gpu-1-mig-3g40gb-9-0",
		want: `
aisched_gpu_mig_devices{model="NVIDIA A100-SXM4-80GB",node="n1",profile="3g.40gb",state="allocated"} 1
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := draState(t, draCards(gpu.Card{MemoryMiB: 81920, Healthy: true}, gpu.Card{MemoryMiB: 81920, Healthy: true}), tc.opts)
			if _, ok := s.DRA("n1"); !ok {
				t.Fatal("no DRA node n1")
			}
			s.ObserveClaim(allocated("c1", "mig", result(tc.held)))
			want := `
# HELP aisched_gpu_mig_devices [ALPHA] MIG devices that the GPU's DRA driver publishes, by node, card model, MIG profile and state: allocated (a claim holds it) or free; a placement of a card partitioned dynamically counts only while a claim holds it.
# TYPE aisched_gpu_mig_devices gauge` + tc.want + `# HELP aisched_gpu_cards [ALPHA] GPU cards by node, model and state: allocated (held whole), shared (held in part by pods sharing it), free; cards of another scheduler's pods count once the node agent located them.
# TYPE aisched_gpu_cards gauge
aisched_gpu_cards{model="NVIDIA A100-SXM4-80GB",node="n1",state="free"} 1
aisched_gpu_cards{model="NVIDIA A100-SXM4-80GB",node="n1",state="shared"} 1
`
			if err := testutil.CustomCollectAndCompare(s.Collector(), strings.NewReader(want), "aisched_gpu_mig_devices", "aisched_gpu_cards"); err != nil {
				t.Error(err)
			}
		})
	}
}
