package sim

import (
	"context"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/sim/metrics"
	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/simcluster"
	"github.com/aisched/aisched/pkg/topology"
)

// topologyPrefix starts aisched's topology keys, which a policy that
// ignores topology drops from the pods.
const topologyPrefix = "topology.aisched.io/"

// withoutTopology drops what the pods ask of topologies (a policy's
// ignoreTopology): the baseline, placed as before topologies.
func withoutTopology(arrivals []arrival) {
	for _, a := range arrivals {
		maps.DeleteFunc(a.pod.Annotations, func(k, _ string) bool { return strings.HasPrefix(k, topologyPrefix) })
	}
}

// createTopologies creates the scenario's aischedtopologies.
func createTopologies(ctx context.Context, c simcluster.Cluster, s *scenario.Scenario) error {
	for _, t := range s.Topologies {
		obj := &aischedv1alpha1.Topology{ObjectMeta: metav1.ObjectMeta{Name: t.Name}}
		for _, l := range t.Levels {
			obj.Spec.Levels = append(obj.Spec.Levels, aischedv1alpha1.TopologyLevel{NodeLabel: l})
		}
		if _, err := c.Aisched().AischedV1alpha1().AischedTopologies().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// askedGang is what a gang of the workload asked of topologies, and its
// min-available.
type askedGang struct {
	asked        *topology.Resolved
	minAvailable int
}

// askedGangs returns, by group key, the gangs of the workload that ask for
// topology domains, resolved against the scenario's topologies.
func askedGangs(s *scenario.Scenario) map[string]askedGang {
	gangs := map[string]askedGang{}
	if len(s.Topologies) == 0 {
		return gangs
	}
	tops := make([]*topology.Topology, len(s.Topologies))
	for i, t := range s.Topologies {
		tops[i] = topology.OfLabels(t.Name, "topology "+t.Name, t.Levels)
	}
	for _, it := range s.Workload {
		c, ok, err := topology.OfPod(buildPod(it, 0, ""))
		if !ok || err != nil {
			continue
		}
		r, err := topology.Resolve(c, tops)
		if err != nil {
			continue
		}
		for k := range it.Count {
			if name, minAvailable, ok := it.GangOf(k); ok {
				gangs[it.Namespace+"/"+name] = askedGang{asked: r, minAvailable: minAvailable}
			}
		}
	}
	return gangs
}

// placed is how a gang's members were placed, at each level it asked.
func (g askedGang) placed(members []*corev1.Node) metrics.TopologyGroup {
	r := g.asked
	at := func(level int) []string {
		if level < 0 {
			return nil
		}
		out := make([]string, len(members))
		for i, n := range members {
			out[i], _ = r.Topology.Domain(n, level)
		}
		return out
	}
	return metrics.TopologyGroup{Required: at(r.Required), Preferred: at(r.Preferred), Slice: at(r.Slice), SliceSize: r.SliceSize}
}

// measureTopology judges the gangs of items that ask for topology
// domains by what they asked, whatever the policy did with it: for each
// gang with min-available members bound, the domains of its bound members
// at its required, preferred and slice levels (metrics.Topology).
func measureTopology(s *scenario.Scenario, pods []corev1.Pod, nodes []corev1.Node, res *metrics.Result) {
	if len(s.Topologies) == 0 {
		return
	}
	gangs := askedGangs(s)
	byName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	members := map[string][]*corev1.Node{}
	for i := range pods {
		p := &pods[i]
		key, ok := podgroup.KeyOf(p)
		if n := byName[p.Spec.NodeName]; ok && n != nil {
			if _, asked := gangs[key]; asked {
				members[key] = append(members[key], n)
			}
		}
	}
	var groups []metrics.TopologyGroup
	for _, key := range slices.Sorted(maps.Keys(gangs)) {
		g := gangs[key]
		if len(members[key]) < g.minAvailable {
			continue // never placed: nothing to judge
		}
		groups = append(groups, g.placed(members[key]))
	}
	t := metrics.Topology(groups)
	res.TopologyRequiredShare, res.TopologyPreferredShare, res.TopologyDomainsSpanned, res.TopologySlicesWhole =
		t.RequiredShare, t.PreferredShare, t.DomainsSpanned, t.SlicesWhole
}
