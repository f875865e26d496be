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
	"github.com/aisched/aisched/pkg/gpuledger"
)

// Resources is what placement counts besides cards: CPU, memory and pod
// slots. Cards, whole or shared, are placed by the GPU ledger
// (gpuledger.NodeGPUs), as GPUFit places them.
type Resources struct {
	MilliCPU int64
	Memory   int64
	Pods     int64
}

// Covers reports whether r holds d.
func (r Resources) Covers(d Resources) bool {
	return r.MilliCPU >= d.MilliCPU && r.Memory >= d.Memory && r.Pods >= d.Pods
}

// Sub returns r - d.
func (r Resources) Sub(d Resources) Resources {
	return Resources{r.MilliCPU - d.MilliCPU, r.Memory - d.Memory, r.Pods - d.Pods}
}

// Add returns r + d.
func (r Resources) Add(d Resources) Resources {
	return Resources{r.MilliCPU + d.MilliCPU, r.Memory + d.Memory, r.Pods + d.Pods}
}

// floor returns r with negative amounts set to zero.
func (r Resources) floor() Resources {
	return Resources{max(r.MilliCPU, 0), max(r.Memory, 0), max(r.Pods, 0)}
}

// RequestOf returns what one pod takes from a node besides cards.
func RequestOf(pod *corev1.Pod) Resources {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return Resources{MilliCPU: req.Cpu().MilliValue(), Memory: req.Memory().Value(), Pods: 1}
}

// Demand is one pod to place.
type Demand struct {
	Pod     *corev1.Pod
	Request Resources
	// GPU is the pod's GPU request; zero for a pod without GPUs, or with
	// an invalid request (GPUFit refuses it, naming the error).
	GPU gpu.Request
	// selection is the pod's node selector and required node affinity.
	selection nodeaffinity.RequiredNodeAffinity
	// shape is what demands alike share (demandShape).
	shape string
	// held are the cards a bound pod holds, and holds whether the GPU
	// ledger can name them (gpuledger.HoldingOf), read with the demand;
	// requested is the pod's nvidia.com/gpu request (gpu.RequestedCards).
	held      []int
	holds     bool
	requested int64
}

// DemandOf returns the demand of a pod.
func DemandOf(pod *corev1.Pod) Demand {
	r, _ := gpu.ParseRequest(pod)
	d := Demand{Pod: pod, Request: RequestOf(pod), GPU: r, selection: nodeaffinity.GetRequiredNodeAffinity(pod)}
	d.shape = demandShape(&d)
	d.held, _, d.holds = gpuledger.HoldingOf(pod)
	d.requested = gpu.RequestedCards(pod)
	return d
}

// String is the demand in the words of a pod spec: "2 GPUs, 4 CPU, 8Gi
// memory", "500/1000 of a GPU, ...", "300/1000 of each of 2 GPUs, ...".
func (d Demand) String() string {
	var parts []string
	if g := d.GPU.Describe(); g != "" {
		parts = append(parts, g)
	}
	parts = append(parts, resource.NewMilliQuantity(d.Request.MilliCPU, resource.DecimalSI).String()+" CPU",
		resource.NewQuantity(d.Request.Memory, resource.BinarySI).String()+" memory")
	return strings.Join(parts, ", ")
}

// largestFirst orders demands by GPU (in thousandths of a card), then
// CPU, then memory, largest first: the order in which placement takes
// pods.
func largestFirst(a, b Demand) int {
	return cmp.Or(cmp.Compare(b.GPU.TotalMilli(), a.GPU.TotalMilli()),
		cmp.Compare(b.Request.MilliCPU, a.Request.MilliCPU), cmp.Compare(b.Request.Memory, a.Request.Memory))
}

// Room is a node: what it has left (Free), what it has (Allocatable), and
// its cards with what pods hold of them (GPUs).
type Room struct {
	Node        *corev1.Node
	Free        Resources
	Allocatable Resources
	GPUs        gpuledger.NodeGPUs
	// Pods are the pods bound to the node, which a group of higher
	// priority may preempt.
	Pods []*corev1.Pod
}

// fits reports whether d fits the room's free resources and cards.
func (r *Room) fits(d *Demand) bool {
	return r.Free.Covers(d.Request) && r.GPUs.Fits(d.GPU)
}

// take places d on the room and returns the cards it got.
func (r *Room) take(d *Demand) []int {
	r.Free = r.Free.Sub(d.Request)
	cards, _ := r.GPUs.Take(d.GPU)
	return cards
}

// give undoes a take.
func (r *Room) give(d *Demand, cards []int) {
	r.Free = r.Free.Add(d.Request)
	r.GPUs.Give(d.GPU, cards)
}

// tighter reports whether a has less left than b: fewer thousandths of a
// card, then less CPU (best fit).
func tighter(a, b *Room) bool {
	fa, fb := a.GPUs.FreeMilli(), b.GPUs.FreeMilli()
	return fa < fb || fa == fb && a.Free.MilliCPU < b.Free.MilliCPU
}

// placement is where Fit or FitFirst put each demand: a room index, or -1,
// and the cards it got there.
type placement struct {
	at    []int
	cards [][]int
}

func newPlacement(n int) placement {
	p := placement{at: make([]int, n), cards: make([][]int, n)}
	for i := range p.at {
		p.at[i] = -1
	}
	return p
}

// Fit places as many demands as it can, up to want, on the free resources
// and cards of rooms, which it updates: best fit, largest demands first
// (GPUs, then CPU, then memory). It returns how many it placed and where.
// It checks CPU, memory, pod slots, cards as GPUFit does (count, per-card
// constraints, shares), node selectors and required node affinity,
// NoSchedule and NoExecute taints, and unschedulable nodes; not inter-pod
// affinity or ports, which the Filter plugins check for each pod.
func Fit(demands []Demand, rooms []Room, want int) (int, placement) {
	return fitIn(demands, rooms, nil, want)
}

// fitIn is Fit on the rooms of scope (indexes into rooms), or on every
// room when scope is nil: a group placed inside one topology domain.
func fitIn(demands []Demand, rooms []Room, scope []int, want int) (int, placement) {
	order := make([]int, len(demands))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return largestFirst(demands[i], demands[j]) })
	p := newPlacement(len(demands))
	fit := 0
	for _, i := range order {
		if fit >= want {
			break
		}
		d := &demands[i]
		best := -1
		n := len(rooms)
		if scope != nil {
			n = len(scope)
		}
		for k := range n {
			r := k
			if scope != nil {
				r = scope[k]
			}
			if !rooms[r].fits(d) {
				continue
			}
			// Best fit: the node left with the least GPU, then CPU; the
			// selector and taint checks only for a better candidate.
			if best >= 0 && !tighter(&rooms[r], &rooms[best]) {
				continue
			}
			if d.Allows(rooms[r].Node) {
				best = r
			}
		}
		if best < 0 {
			continue
		}
		p.at[i], p.cards[i] = best, rooms[best].take(d)
		fit++
	}
	return fit, p
}

// FitFirst is Fit with first fit from a moving cursor instead of best
// fit: about one node looked at per demand while nodes have room, for the
// many members the queue admitted and the scheduler has yet to place.
func FitFirst(demands []Demand, rooms []Room, want int) (int, placement) {
	cursor := 0
	return fitFirst(demands, rooms, want, &cursor)
}

// fitFirst is FitFirst from *cursor, which it moves: a plan that places
// group after group goes on from where the last one found room, instead
// of looking again at every node filled before.
func fitFirst(demands []Demand, rooms []Room, want int, at *int) (int, placement) {
	p := newPlacement(len(demands))
	fit, cursor := 0, *at
	if cursor >= len(rooms) {
		cursor = 0
	}
	defer func() { *at = cursor }()
	for j := range demands {
		d := &demands[j]
		if fit >= want || len(rooms) == 0 {
			continue
		}
		for i := range rooms {
			r := &rooms[(cursor+i)%len(rooms)]
			if r.fits(d) && d.Allows(r.Node) {
				cursor = (cursor + i) % len(rooms)
				p.at[j], p.cards[j] = cursor, r.take(d)
				fit++
				break
			}
		}
	}
	return fit, p
}

// unfit gives back to rooms what a Fit or FitFirst took.
func unfit(demands []Demand, rooms []Room, p placement) {
	for i, r := range p.at {
		if r >= 0 {
			rooms[r].give(&demands[i], p.cards[i])
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

// shapeOf is a key that demands alike share: what they ask for, and where
// they may run (node selector, required affinity, tolerations). alike is
// false when the demands differ; they then have no key.
func shapeOf(demands []Demand) (key string, alike bool) {
	if len(demands) == 0 {
		return "", false
	}
	key = demands[0].shape
	for i := 1; i < len(demands); i++ {
		if demands[i].shape != key {
			return "", false
		}
	}
	return key, true
}

func demandShape(d *Demand) string {
	spec := &d.Pod.Spec
	var affinity any
	if spec.Affinity != nil && spec.Affinity.NodeAffinity != nil {
		affinity = spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return fmt.Sprintf("%v|%+v|%v|%v|%v", d.Request, d.GPU, spec.NodeSelector, affinity, spec.Tolerations)
}
