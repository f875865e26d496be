package dra

import (
	"strings"
	"testing"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
)

// MIG devices are counted by their card's model and their profile: the
// static ones allocated or free, the dynamic placements only while a
// claim holds one; their cards count as shared. The two ledgers'
// collectors are registered together, as the scheduler registers them.
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
			if _, ok := s.View("n1"); !ok {
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
			registry := metrics.NewKubeRegistry()
			registry.CustomMustRegister(s.State.Collector(), s.Ledger.Collector())
			if err := testutil.GatherAndCompare(registry, strings.NewReader(want), "aisched_gpu_mig_devices", "aisched_gpu_cards"); err != nil {
				t.Error(err)
			}
		})
	}
}
