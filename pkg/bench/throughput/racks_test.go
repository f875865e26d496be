package throughput

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/podgroup"
)

// Bad --rack-nodes values, and racks too small for a gang, are refused
// before any cluster starts.
func TestRackNodesBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"negative", Options{RackNodes: -1}, "--rack-nodes -1: want 0 (no racks) to --nodes 1000"},
		{"more than the nodes", Options{RackNodes: 1001}, "--rack-nodes 1001: want 0 (no racks) to --nodes 1000"},
		// 1000 = 999 + 1: the last rack is one node of 8 cards.
		{"last rack too small", Options{RackNodes: 999, GPU: true, Profiles: []string{NativeCase + "@16"}},
			"--rack-nodes 999: the smallest rack, 1 nodes, holds 8 pods, and case native@16 gangs 16"},
		// 2 nodes with 6 of 8 cards held hold 4 pods (1000 nodes hold 2000).
		{"cards held", Options{RackNodes: 2, GPU: true, Fill: 0.75, Profiles: []string{"aisched@16"}},
			"the smallest rack, 2 nodes, holds 4 pods, and case aisched@16 gangs 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Nodes, opts.Pods = 1000, 1600
			if opts.Profiles == nil {
				opts.Profiles = []string{"default-scheduler"}
			}
			_, err := Run(context.Background(), opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	for _, opts := range []Options{
		{Nodes: 1000, Pods: 3200, GPU: true, RackNodes: 16, Profiles: []string{NativeCase + "@16", "aisched@16"}},
		// 1000 = 62 * 16 + 8: the last rack's 8 nodes hold 64 cards.
		{Nodes: 1000, Pods: 3200, GPU: true, RackNodes: 16, Profiles: []string{"aisched@64"}},
		{Nodes: 1000, Pods: 3200, RackNodes: 1000, Profiles: []string{"default-scheduler"}},
	} {
		if err := checkRacks(opts); err != nil {
			t.Errorf("checkRacks(%+v): %v, want it accepted", opts, err)
		}
	}
}

// Every RackNodes consecutive nodes of the bench cluster share a rack
// label; without racks nodes have none.
func TestBenchClusterRacks(t *testing.T) {
	pool := benchCluster(Options{Nodes: 40, GPU: true, RackNodes: 16}).NodePools[0]
	for i, want := range map[int]string{0: "node-rack-0", 15: "node-rack-0", 16: "node-rack-1", 39: "node-rack-2"} {
		if got := pool.TopologyLabels(i)[RackLabel]; got != want {
			t.Errorf("node %d: rack %q, want %q", i, got, want)
		}
	}
	if got := benchCluster(Options{Nodes: 40}).NodePools[0].TopologyLabels(0); got != nil {
		t.Errorf("without racks: labels %v, want none", got)
	}
}

// With racks an aisched gang's pods ask for one rack and a native
// PodGroup carries upstream's topology constraint; plain pods and native
// pods carry no aisched key, and the shared annotations are not changed.
func TestRackPodsAndGroups(t *testing.T) {
	shared := map[string]string{"gpu.aisched.io/milli": "250"}
	gang, err := parseCase("aisched@4", 8)
	if err != nil {
		t.Fatal(err)
	}
	native, err := parseCase(NativeCase+"@4", 8)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := parseCase("aisched", 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		bc              benchCase
		racks           bool
		wantAnnotations map[string]string
	}{
		{"aisched gang with racks", gang, true, map[string]string{"gpu.aisched.io/milli": "250", aischedv1alpha1.TopologyRequiredKey: RackLabel}},
		{"aisched gang without racks", gang, false, shared},
		{"native with racks", native, true, shared},
		{"plain with racks", plain, true, shared},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := benchPod(5, "bench", tc.bc, tc.racks, shared, nil, nil)
			if diff := cmp.Diff(tc.wantAnnotations, pod.Annotations); diff != "" {
				t.Errorf("annotations (-want,+got):\n%s", diff)
			}
			if tc.bc == gang && pod.Labels[podgroup.NameLabel] != "group-00001" {
				t.Errorf("pod 5 in group %q, want group-00001", pod.Labels[podgroup.NameLabel])
			}
		})
	}
	if diff := cmp.Diff(map[string]string{"gpu.aisched.io/milli": "250"}, shared); diff != "" {
		t.Errorf("the shared annotations changed (-want,+got):\n%s", diff)
	}

	pg := nativeGroup(5, "bench", native, true)
	want := &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: RackLabel}}}
	if diff := cmp.Diff(want, pg.Spec.SchedulingConstraints); diff != "" {
		t.Errorf("native PodGroup with racks: constraints (-want,+got):\n%s", diff)
	}
	if pg.Name != "group-00001" || pg.Spec.SchedulingPolicy.Gang == nil || pg.Spec.SchedulingPolicy.Gang.MinCount != 4 {
		t.Errorf("native PodGroup %s %+v, want group-00001, a gang of 4", pg.Name, pg.Spec.SchedulingPolicy)
	}
	if pg := nativeGroup(5, "bench", native, false); pg.Spec.SchedulingConstraints != nil {
		t.Errorf("native PodGroup without racks: constraints %+v, want none", pg.Spec.SchedulingConstraints)
	}
}

// The native case turns topology-aware workload scheduling on only with
// racks, and fails when the profile does not run its placement plugin.
func TestNativeTopologyGates(t *testing.T) {
	if diff := cmp.Diff(map[string]bool{"GenericWorkload": true, "TopologyAwareWorkloadScheduling": true}, rackGates(true)); diff != "" {
		t.Errorf("gates with racks (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"GenericWorkload": true}, rackGates(false)); diff != "" {
		t.Errorf("gates without racks (-want,+got):\n%s", diff)
	}
	with := &config.Plugins{PlacementGenerate: config.PluginSet{Enabled: []config.Plugin{{Name: names.TopologyPlacementGenerator}}}}
	if err := checkNativeTopology(with); err != nil {
		t.Errorf("a profile with %s: %v", names.TopologyPlacementGenerator, err)
	}
	without := &config.Plugins{Filter: config.PluginSet{Enabled: []config.Plugin{{Name: names.TopologyPlacementGenerator}}}}
	for _, p := range []*config.Plugins{nil, without} {
		if err := checkNativeTopology(p); err == nil || !strings.Contains(err.Error(), "topology-aware placement is off") {
			t.Errorf("a profile without placement generation: %v, want it refused", err)
		}
	}
}

// A gang is inside one rack when all its members are bound to nodes of one
// rack; a member unbound, on a node in no rack, or in another rack
// spreads it.
func TestGangsOutsideOneRack(t *testing.T) {
	racks := map[string]string{"n0": "r0", "n1": "r0", "n2": "r1", "n3": "r1"}
	for _, tc := range []struct {
		name  string
		nodes []string // "" for a pod not bound
		want  []string
	}{
		{"each gang in one rack", []string{"n0", "n1", "n3", "n2"}, nil},
		{"a gang across two racks", []string{"n0", "n1", "n1", "n2"}, []string{"group-00001 in r0, r1"}},
		{"a member not bound", []string{"n0", "", "n2", "n2"}, []string{"group-00000 in (not bound), r0"}},
		{"a node in no rack", []string{"n9", "n9", "n2", "n3"}, []string{"group-00000 in node n9 (in no rack)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := gangsOutsideOneRack(func(i int) (string, bool) { return tc.nodes[i], tc.nodes[i] != "" }, len(tc.nodes), 2, racks)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
