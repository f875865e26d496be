package sim

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/simcluster"
)

// slowdown is a scenario's topologySlowdown: a gang that asked for
// topology domains and whose min-available members are not as it asked
// (metrics.TopologyGroup.Spread) runs the factor times its duration. The
// simulated kubelets ask it when a member's duration has passed
// (nodesim.Options.Slowdown), when every member is long bound; the
// measurement asks it again of the pods as they ended.
type slowdown struct {
	factor float64
	gangs  map[string]askedGang

	mu sync.Mutex
	// nodes are the cluster's, by name, once it started.
	nodes map[string]*corev1.Node
}

// newSlowdown returns the slowdown of s: nil when it asks for none or no
// gang asks for topology domains.
func newSlowdown(s *scenario.Scenario) *slowdown {
	if s.TopologySlowdown <= 1 {
		return nil
	}
	gangs := askedGangs(s)
	if len(gangs) == 0 {
		return nil
	}
	return &slowdown{factor: s.TopologySlowdown, gangs: gangs}
}

// started reads the nodes of the cluster the run started.
func (d *slowdown) started(ctx context.Context, c simcluster.Cluster) error {
	if d == nil {
		return nil
	}
	list, err := c.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nodes := make(map[string]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[list.Items[i].Name] = &list.Items[i]
	}
	d.mu.Lock()
	d.nodes = nodes
	d.mu.Unlock()
	return nil
}

// kubelet is the slowdown as the simulated kubelets ask it, with the pods
// they know; nil without a slowdown.
func (d *slowdown) kubelet() func(*corev1.Pod, corelisters.PodLister) float64 {
	if d == nil {
		return nil
	}
	return func(pod *corev1.Pod, pods corelisters.PodLister) float64 {
		name, ok := pod.Labels[podgroup.NameLabel]
		if !ok {
			return 1
		}
		members, err := pods.Pods(pod.Namespace).List(labels.SelectorFromSet(labels.Set{podgroup.NameLabel: name}))
		if err != nil {
			return 1
		}
		return d.of(pod, members)
	}
}

// of returns how many times its duration pod runs, with the pods of its
// group: the factor when its gang has min-available members bound and
// they are spread, else 1.
func (d *slowdown) of(pod *corev1.Pod, members []*corev1.Pod) float64 {
	if d == nil {
		return 1
	}
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return 1
	}
	g, asked := d.gangs[key]
	if !asked {
		return 1
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var on []*corev1.Node
	for _, m := range members {
		if n := d.nodes[m.Spec.NodeName]; n != nil {
			on = append(on, n)
		}
	}
	if len(on) < g.minAvailable || !g.placed(on).Spread() {
		return 1
	}
	return d.factor
}

// byPod returns, for the pods of a run as they ended, how many times its
// duration each ran (of), by namespace/name.
func (d *slowdown) byPod(pods []corev1.Pod) map[string]float64 {
	if d == nil {
		return nil
	}
	groups := map[string][]*corev1.Pod{}
	for i := range pods {
		if key, ok := podgroup.KeyOf(&pods[i]); ok {
			groups[key] = append(groups[key], &pods[i])
		}
	}
	out := map[string]float64{}
	for _, members := range groups {
		for _, p := range members {
			if f := d.of(p, members); f > 1 {
				out[p.Namespace+"/"+p.Name] = f
			}
		}
	}
	return out
}
