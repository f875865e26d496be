package jobqueue

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/aisched/aisched/pkg/gpu"
)

// Resources is what placement counts: CPU, memory, whole GPUs and pod
// slots.
type Resources struct {
	MilliCPU int64
	Memory   int64
	GPUs     int64
	Pods     int64
}

// Covers reports whether r holds d.
func (r Resources) Covers(d Resources) bool {
	return r.MilliCPU >= d.MilliCPU && r.Memory >= d.Memory && r.GPUs >= d.GPUs && r.Pods >= d.Pods
}

// Sub returns r - d.
func (r Resources) Sub(d Resources) Resources {
	return Resources{r.MilliCPU - d.MilliCPU, r.Memory - d.Memory, r.GPUs - d.GPUs, r.Pods - d.Pods}
}

// Add returns r + d.
func (r Resources) Add(d Resources) Resources {
	return Resources{r.MilliCPU + d.MilliCPU, r.Memory + d.Memory, r.GPUs + d.GPUs, r.Pods + d.Pods}
}

// floor returns r with negative amounts set to zero.
func (r Resources) floor() Resources {
	return Resources{max(r.MilliCPU, 0), max(r.Memory, 0), max(r.GPUs, 0), max(r.Pods, 0)}
}

// String is the demand in the words of a pod spec: "2 GPUs, 4 CPU, 8Gi".
func (r Resources) String() string {
	var parts []string
	if r.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d GPUs", r.GPUs))
	}
	parts = append(parts, resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI).String()+" CPU",
		resource.NewQuantity(r.Memory, resource.BinarySI).String()+" memory")
	return strings.Join(parts, ", ")
}

// RequestOf returns what one pod takes from a node.
func RequestOf(pod *corev1.Pod) Resources {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	g := req[gpu.ResourceName]
	return Resources{MilliCPU: req.Cpu().MilliValue(), Memory: req.Memory().Value(), GPUs: g.Value(), Pods: 1}
}

// largestFirst orders requests by GPUs, then CPU, then memory, largest
// first: the order in which placement takes pods.
func largestFirst(a, b Resources) int {
	return cmp.Or(cmp.Compare(b.GPUs, a.GPUs), cmp.Compare(b.MilliCPU, a.MilliCPU), cmp.Compare(b.Memory, a.Memory))
}

// Demand is one pod to place.
type Demand struct {
	Pod     *corev1.Pod
	Request Resources
	// selection is the pod's node selector and required node affinity.
	selection nodeaffinity.RequiredNodeAffinity
}

// DemandOf returns the demand of a pod.
func DemandOf(pod *corev1.Pod) Demand {
	return Demand{Pod: pod, Request: RequestOf(pod), selection: nodeaffinity.GetRequiredNodeAffinity(pod)}
}

// Room is a node: what it has left (Free) and what it has (Allocatable).
type Room struct {
	Node        *corev1.Node
	Free        Resources
	Allocatable Resources
}

// Fit places as many demands as it can, up to want, on the free resources
// of rooms, which it updates: best fit, largest demands first (GPUs, then
// CPU, then memory). It returns how many it placed and, for each demand in
// the order given, the index of its room or -1. It checks CPU, memory, GPU
// count and pod slots, node selectors and required node affinity,
// NoSchedule and NoExecute taints, and unschedulable nodes; not inter-pod
// affinity, ports or per-card constraints, which the Filter plugins check
// for each pod.
func Fit(demands []Demand, rooms []Room, want int) (int, []int) {
	order := make([]int, len(demands))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		return largestFirst(demands[i].Request, demands[j].Request)
	})
	at := make([]int, len(demands))
	for i := range at {
		at[i] = -1
	}
	fit := 0
	for _, i := range order {
		if fit >= want {
			break
		}
		d := demands[i]
		best := -1
		for r := range rooms {
			free := rooms[r].Free
			if !free.Covers(d.Request) {
				continue
			}
			// Best fit: the node left with the fewest GPUs, then CPU; the
			// selector and taint checks only for a better candidate.
			if best >= 0 {
				bf := rooms[best].Free
				if free.GPUs > bf.GPUs || (free.GPUs == bf.GPUs && free.MilliCPU >= bf.MilliCPU) {
					continue
				}
			}
			if d.Allows(rooms[r].Node) {
				best = r
			}
		}
		if best < 0 {
			continue
		}
		rooms[best].Free = rooms[best].Free.Sub(d.Request)
		at[i] = best
		fit++
	}
	return fit, at
}

// FitFirst is Fit with first fit from a moving cursor instead of best
// fit: about one node looked at per demand while nodes have room, for the
// many members the queue admitted and the scheduler has yet to place.
func FitFirst(demands []Demand, rooms []Room, want int) (int, []int) {
	at := make([]int, len(demands))
	fit, cursor := 0, 0
	for j, d := range demands {
		at[j] = -1
		if fit >= want || len(rooms) == 0 {
			continue
		}
		for i := range rooms {
			r := &rooms[(cursor+i)%len(rooms)]
			if r.Free.Covers(d.Request) && d.Allows(r.Node) {
				r.Free = r.Free.Sub(d.Request)
				cursor = (cursor + i) % len(rooms)
				at[j] = cursor
				fit++
				break
			}
		}
	}
	return fit, at
}

// unfit gives back to rooms what a Fit or FitFirst took.
func unfit(demands []Demand, rooms []Room, at []int) {
	for i, r := range at {
		if r >= 0 {
			rooms[r].Free = rooms[r].Free.Add(demands[i].Request)
		}
	}
}

// Allows reports whether the pod may run on node: selector, required
// affinity, taints and cordon.
func (d Demand) Allows(node *corev1.Node) bool {
	if node == nil || node.Spec.Unschedulable {
		return false
	}
	if ok, _ := d.selection.Match(node); !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, d.Pod.Spec.Tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false)
	return !untolerated
}
