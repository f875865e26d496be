package gpuledger

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
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
