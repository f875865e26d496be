package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/aisched/aisched/pkg/sim/metrics"
	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/simcluster"
)

// topologyScenario has two blocks of two racks of 4 nodes of 4 cards.
// Background pods leave 3 cards on nodes 0, 1, 4 and 5 (racks 0 and 1)
// and nothing on nodes 2, 3, 6 and 7: a gang of 4 pods of 3 cards
// that asks for one rack fits only in rack 2 or 3, where best fit alone
// takes the fuller nodes 0, 1, 4 and 5 of two racks. A second gang asks
// for one block in slices of 2 per rack.
const topologyScenario = `apiVersion: aisched.io/v1alpha1
kind: Scenario
name: topology
cluster:
  nodePools:
    - name: gpu
      count: 16
      cpu: "32"
      memory: 128Gi
      gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}
      topology:
        - {label: example.com/block, nodes: 8}
        - {label: example.com/rack, nodes: 4}
topologies:
  - {name: racks, levels: [example.com/block, example.com/rack]}
policies:
  - name: aisched
  - {name: aisched-no-topology, profile: aisched, ignoreTopology: true}
workload:
  - {name: one-a, node: gpu-0, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}
  - {name: one-b, node: gpu-1, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}
  - {name: one-c, node: gpu-4, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}
  - {name: one-d, node: gpu-5, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}
  - {name: full-a, node: gpu-2, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "4"}}
  - {name: full-b, node: gpu-3, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "4"}}
  - {name: full-c, node: gpu-6, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "4"}}
  - {name: full-d, node: gpu-7, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "4"}}
  - name: rack
    count: 4
    gangSize: 4
    arrival: 1s
    requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "3"}
    annotations: {topology.aisched.io/required: example.com/rack}
  - name: tp
    count: 4
    gangSize: 4
    arrival: 2s
    requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "3"}
    annotations:
      topology.aisched.io/required: example.com/block
      topology.aisched.io/slice-level: example.com/rack
      topology.aisched.io/slice-size: "2"
`

// runByPolicy runs the scenario src on the fast engine and returns each
// policy's result of its one seed.
func runByPolicy(t *testing.T, src string) map[string]metrics.Result {
	t.Helper()
	s, err := scenario.Parse("topology.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), s, Options{Engine: simcluster.Fast, Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]metrics.Result{}
	for _, p := range rep.Policies {
		results[p.Name] = p.Runs[0].Result
	}
	return results
}

// A run with topologies keeps every gang inside its domains and slices
// whole; the same workload with ignoreTopology spreads the rack gang over
// two racks, and the metrics, judged by what the gangs asked, say so.
func TestTopologyRun(t *testing.T) {
	results := runByPolicy(t, topologyScenario)
	value := func(policy, name string, v *float64) float64 {
		t.Helper()
		if v == nil {
			t.Fatalf("%s: %s not measured", policy, name)
		}
		return *v
	}
	with := results["aisched"]
	if with.PendingPods != 0 {
		t.Errorf("aisched: %d pods pending, want 0", with.PendingPods)
	}
	for name, v := range map[string]*float64{"required share": with.TopologyRequiredShare, "slices whole": with.TopologySlicesWhole, "domains spanned": with.TopologyDomainsSpanned} {
		if got := value("aisched", name, v); got != 1 {
			t.Errorf("aisched: %s %v, want 1", name, got)
		}
	}
	without := results["aisched-no-topology"]
	if got := value("aisched-no-topology", "required share", without.TopologyRequiredShare); got >= 1 {
		t.Errorf("aisched-no-topology: required share %v, want below 1 (the rack gang on two racks)", got)
	}
	if got := value("aisched-no-topology", "domains spanned", without.TopologyDomainsSpanned); got <= 1 {
		t.Errorf("aisched-no-topology: domains spanned %v, want above 1", got)
	}
}

// With topologySlowdown, a gang spread over domains runs longer: the
// no-topology run's rack gang, over two racks, runs 2 x its minute, and
// its work counts the minute only; aisched's gangs, as they asked, run
// their minute.
func TestTopologySlowdown(t *testing.T) {
	src := strings.Replace(topologyScenario, "topologies:\n", "topologySlowdown: 2\nsettle: 65s\ntopologies:\n", 1)
	src = strings.ReplaceAll(src, "    arrival: 1s\n", "    arrival: 1s\n    duration: 1m\n")
	src = strings.ReplaceAll(src, "    arrival: 2s\n", "    arrival: 2s\n    duration: 1m\n")
	// The background pods bound past the scheduler hold the last card,
	// as GPUFit would write it, so that the kubelets admit the gangs on
	// the cards the scheduler chose (none is refused, which would end it
	// at once).
	src = strings.ReplaceAll(src, `nvidia.com/gpu: "1"}}`, `nvidia.com/gpu: "1"}, annotations: {gpu.aisched.io/assigned: "3"}}`)
	results := runByPolicy(t, src)
	with, without := results["aisched"], results["aisched-no-topology"]
	for _, r := range []metrics.Result{with, without} {
		if r.MakespanSeconds == nil || r.GPUBusyPct == nil || r.GPUWorkPct == nil {
			t.Fatalf("makespan, GPU busy or work not measured: %+v", r)
		}
	}
	// aisched: the gangs end a minute after the tp gang arrived (2 s).
	if got := *with.MakespanSeconds; got < 60 || got > 65 {
		t.Errorf("aisched: makespan %vs, want about 62 (no gang slowed)", got)
	}
	if *with.GPUWorkPct != *with.GPUBusyPct {
		t.Errorf("aisched: GPU work %v%% != busy %v%%, want equal (nothing slowed)", *with.GPUWorkPct, *with.GPUBusyPct)
	}
	// Without topology the rack gang spans two racks: 2 minutes.
	if got := *without.MakespanSeconds; got < 120 || got > 125 {
		t.Errorf("aisched-no-topology: makespan %vs, want about 121 (the spread gang run twice its minute)", got)
	}
	if *without.GPUWorkPct >= *without.GPUBusyPct {
		t.Errorf("aisched-no-topology: GPU work %v%% >= busy %v%%, want less (the spread gang's second minute is no work)", *without.GPUWorkPct, *without.GPUBusyPct)
	}
}
