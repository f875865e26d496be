package coscheduling

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
)

// demand is what one pod takes from a node.
type demand struct {
	pod       *corev1.Pod
	milliCPU  int64
	memory    int64
	gpus      int64
	selection nodeaffinity.RequiredNodeAffinity
}

// room is what a node has left.
type room struct {
	node     *corev1.Node
	milliCPU int64
	memory   int64
	gpus     int64
	pods     int64
}

// placeable returns how many of pods fit together on the free resources
// of nodes: best fit, largest pods first (GPUs, then CPU, then memory).
// It checks CPU, memory, GPU count and pod slots, node selectors and
// required node affinity, NoSchedule and NoExecute taints, and
// unschedulable nodes; not inter-pod affinity, ports or per-card
// constraints, which the Filter plugins check for each member.
func placeable(pods []*corev1.Pod, nodes []fwk.NodeInfo) int {
	return placeableUpTo(pods, nodes, len(pods))
}

// placeableUpTo is placeable that stops counting at want.
func placeableUpTo(pods []*corev1.Pod, nodes []fwk.NodeInfo, want int) int {
	demands := make([]demand, len(pods))
	for i, p := range pods {
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		g := req[gpu.ResourceName]
		demands[i] = demand{pod: p, milliCPU: req.Cpu().MilliValue(), memory: req.Memory().Value(), gpus: g.Value(),
			selection: nodeaffinity.GetRequiredNodeAffinity(p)}
	}
	slices.SortStableFunc(demands, func(a, b demand) int {
		return cmp.Or(cmp.Compare(b.gpus, a.gpus), cmp.Compare(b.milliCPU, a.milliCPU), cmp.Compare(b.memory, a.memory))
	})
	rooms := make([]room, 0, len(nodes))
	for _, ni := range nodes {
		n := ni.Node()
		if n == nil || n.Spec.Unschedulable {
			continue
		}
		alloc, used := ni.GetAllocatable(), ni.GetRequested()
		rooms = append(rooms, room{
			node:     n,
			milliCPU: alloc.GetMilliCPU() - used.GetMilliCPU(),
			memory:   alloc.GetMemory() - used.GetMemory(),
			gpus:     alloc.GetScalarResources()[gpu.ResourceName] - used.GetScalarResources()[gpu.ResourceName],
			pods:     int64(alloc.GetAllowedPodNumber() - len(ni.GetPods())),
		})
	}
	fit := 0
	for _, d := range demands {
		if fit >= want {
			break
		}
		best := -1
		for i := range rooms {
			r := &rooms[i]
			if r.pods < 1 || r.milliCPU < d.milliCPU || r.memory < d.memory || r.gpus < d.gpus {
				continue
			}
			// Best fit: the node left with the fewest GPUs, then CPU; the
			// selector and taint checks only for a better candidate.
			if best >= 0 && (r.gpus > rooms[best].gpus || (r.gpus == rooms[best].gpus && r.milliCPU >= rooms[best].milliCPU)) {
				continue
			}
			if allowed(d, r.node) {
				best = i
			}
		}
		if best < 0 {
			continue
		}
		r := &rooms[best]
		r.pods--
		r.milliCPU -= d.milliCPU
		r.memory -= d.memory
		r.gpus -= d.gpus
		fit++
	}
	return fit
}

func allowed(d demand, node *corev1.Node) bool {
	if ok, _ := d.selection.Match(node); !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, d.pod.Spec.Tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false)
	return !untolerated
}
