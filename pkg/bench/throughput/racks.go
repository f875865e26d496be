package throughput

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/simcluster"
)

// Racks (Options.RackNodes): the bench cluster's nodes are labelled with
// their rack, and every gang of a grouped case must land inside one rack:
// aisched's gangs ask for it with topology.aisched.io/required on an
// aisched Topology of that one level, native PodGroups with upstream's
// schedulingConstraints.topology (TopologyAwareWorkloadScheduling). After
// the run every gang is checked to be inside one rack, so that the
// comparison is of two schedulers that both honour the constraint.

// RackLabel is the node label that names a bench node's rack.
const RackLabel = "bench.aisched.io/rack"

// rackTopology names the aisched Topology of the racks.
const rackTopology = "bench-racks"

// MaxRackNodes bounds Options.RackNodes, as a cluster's nodes are bounded.
const MaxRackNodes = clusterfile.MaxNodes

// rackLevels are the topology levels of the bench pool with racks of
// nodes nodes: node i is in rack "node-rack-<i/nodes>".
func rackLevels(nodes int) []clusterfile.TopologyLevel {
	if nodes == 0 {
		return nil
	}
	return []clusterfile.TopologyLevel{{Label: RackLabel, Nodes: nodes}}
}

// checkRacks bounds opts.RackNodes and checks that the smallest rack (the
// last one, when the racks do not divide the nodes) holds a group of each
// grouped case: a gang that fits no rack would only time out.
func checkRacks(opts Options) error {
	if opts.RackNodes == 0 {
		return nil
	}
	if opts.RackNodes < 0 || opts.RackNodes > min(opts.Nodes, MaxRackNodes) {
		return fmt.Errorf("--rack-nodes %d: want 0 (no racks) to --nodes %d", opts.RackNodes, opts.Nodes)
	}
	smallest := opts.RackNodes
	if rest := opts.Nodes % opts.RackNodes; rest > 0 {
		smallest = rest
	}
	// What one node holds of the pods: its free cards, or its pods.
	perNode := clusterfile.DefaultMaxPods
	switch {
	case opts.GPU:
		perNode = 8 - fillCards(opts.Fill)
	case opts.Shared:
		perNode = 4 * (8 - fillCards(opts.Fill))
	}
	for _, c := range opts.Profiles {
		bc, err := parseCase(c, opts.Pods)
		if err != nil {
			return err
		}
		if bc.groupSize > smallest*perNode {
			return fmt.Errorf("--rack-nodes %d: the smallest rack, %d nodes, holds %d pods, and case %s gangs %d", opts.RackNodes, smallest, smallest*perNode, c, bc.groupSize)
		}
	}
	return nil
}

// rackGates are the feature gates the native case turns on: upstream gang
// scheduling and, with racks, its topology-aware placement.
func rackGates(racks bool) map[string]bool {
	gates := map[string]bool{string(features.GenericWorkload): true}
	if racks {
		gates[string(features.TopologyAwareWorkloadScheduling)] = true
	}
	return gates
}

// createRackTopology creates the aisched Topology of the racks, which the
// aisched gangs' topology.aisched.io/required names the level of.
func createRackTopology(ctx context.Context, cfg *rest.Config) error {
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	t := &aischedv1alpha1.Topology{
		ObjectMeta: metav1.ObjectMeta{Name: rackTopology},
		Spec:       aischedv1alpha1.TopologySpec{Levels: []aischedv1alpha1.TopologyLevel{{NodeLabel: RackLabel}}},
	}
	if _, err := client.AischedV1alpha1().AischedTopologies().Create(ctx, t, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("rack topology: %w", err)
	}
	return nil
}

// checkNativeTopology fails a native case with racks whose scheduler
// profile does not run upstream's topology placement: its gangs would be
// placed without the constraint.
func checkNativeTopology(plugins *config.Plugins) error {
	if !scheduler.RunsPlugin(plugins, scheduler.PlacementGenerate, names.TopologyPlacementGenerator) {
		return fmt.Errorf("the native profile does not run %s: upstream's topology-aware placement is off", names.TopologyPlacementGenerator)
	}
	return nil
}

// gangsOutsideOneRack returns, in order, a line for each gang of the
// first n pods (groups of size) whose members are not all bound inside one
// rack: the node of each bound pod from pods, the rack of each node from
// racks (node name to RackLabel's value; a node without one is in no rack).
func gangsOutsideOneRack(pods func(i int) (node string, bound bool), n, size int, racks map[string]string) []string {
	var out []string
	for first := 0; first < n; first += size {
		seen := map[string]bool{}
		inRacks := true
		for i := first; i < min(first+size, n); i++ {
			node, bound := pods(i)
			rack, ok := racks[node]
			switch {
			case !bound:
				rack, inRacks = notBound, false
			case !ok:
				rack, inRacks = "node "+node+" (in no rack)", false
			}
			seen[rack] = true
		}
		if len(seen) != 1 || !inRacks {
			out = append(out, fmt.Sprintf("%s in %s", groupName(first, size), strings.Join(slices.Sorted(maps.Keys(seen)), ", ")))
		}
	}
	return out
}

// notBound stands for the rack of a member not bound.
const notBound = "(not bound)"

// checkGangsInRacks fails the run when a gang of bc is not inside one
// rack, reading the nodes' rack labels from the apiserver and the pods'
// nodes from what pods saw.
func checkGangsInRacks(ctx context.Context, c kubernetes.Interface, pods *simcluster.PodObserver, n int, bc benchCase) error {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	racks := make(map[string]string, len(nodes.Items))
	for _, node := range nodes.Items {
		if rack, ok := node.Labels[RackLabel]; ok {
			racks[node.Name] = rack
		}
	}
	spread := gangsOutsideOneRack(func(i int) (string, bool) {
		s, ok := pods.Pod(benchNamespace + "/" + benchPodName(i))
		if !ok || s.Bound.IsZero() {
			return "", false
		}
		return s.Pod.Spec.NodeName, true
	}, n, bc.groupSize, racks)
	if n := len(spread); n > 0 {
		const most = 5
		more := ""
		if n > most {
			more = fmt.Sprintf("; and %d more", n-most)
			spread = spread[:most]
		}
		return fmt.Errorf("case %s: %d gangs not inside one rack (%s): %s%s", bc.name, n, RackLabel, strings.Join(spread, "; "), more)
	}
	return nil
}
