// Package workload is the scheduler-wide view of the work that arrives:
// whether the pods that came last ask for GPUs. Plugins that balance CPU
// pods (PCCBalance, LoadAware) read it to tell a cluster that uses its GPU
// nodes as plain capacity, where a CPU pod on a GPU node should be
// balanced like anywhere else, from one where GPU pods are coming, where a
// CPU pod on a GPU node should leave the node's GPUs usable (which FGD and
// BestFit rank) rather than spread.
package workload

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/scheduler/podkind"
)

// Window is how many of the last pods to arrive the view remembers.
const Window = 1000

// Workload remembers whether each of the last Window pods to arrive (to be
// created unbound, for any scheduler) asked for GPUs.
type Workload struct {
	mu   sync.Mutex
	ring [Window]bool
	n    int // pods in the ring
	next int
	gpu  int // GPU pods in the ring
	// deferred are pods that arrived before the GPU ledger saw their
	// claims, oldest first, and requests tells their kind once it has
	// (settleLocked).
	deferred []*corev1.Pod
	requests atomic.Pointer[Requests]
}

// Requests tells what a pod asks of GPUs (the GPU ledger), whether it has
// seen every claim the pod names (before, a pod that claims GPUs reads as a
// CPU pod), and whether a node has cards (a DRA driver's too, which the
// node's allocatable does not show).
type Requests interface {
	podkind.Requests
	ClaimsSeen(pod *corev1.Pod) bool
	GPUNode(ni fwk.NodeInfo) bool
}

// maxDeferred bounds the pods waiting for their claims: past it, the
// oldest is counted as what it reads as then (its claim may never come).
const maxDeferred = Window

// New returns an empty view; Start connects it to a scheduler.
func New() *Workload { return &Workload{} }

// Start follows the pods the scheduler's informer sees arrive; requests
// tells what each asks of GPUs (the GPU ledger, which reads a DRA pod's
// claims). A pod whose claims are made from templates is counted once the
// resourceclaim controller has named them on its status: before, they do
// not exist, and it would count as a CPU pod. A pod whose claims the
// ledger has not seen yet (its informer handler may come after the pod's)
// is counted once it has, when GPU work is next asked for: counted at
// once, every DRA pod of a burst could read as a CPU pod, and CPU pods
// would then be spread over the GPU nodes.
func (w *Workload) Start(factory informers.SharedInformerFactory, requests Requests) error {
	w.requests.Store(&requests)
	observe := func(pod *corev1.Pod) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(pod.Spec.ResourceClaims) > 0 && (len(w.deferred) > 0 || !requests.ClaimsSeen(pod)) {
			// Behind a deferred pod, in arrival order.
			w.deferred = append(w.deferred, pod)
			w.settleLocked()
			return
		}
		w.observeLocked(podkind.Of(requests.RequestOf(pod)) != config.PodKindCPU)
	}
	_, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName == "" && claimsNamed(pod) {
				observe(pod)
			}
		},
		UpdateFunc: func(old, obj interface{}) {
			o, ok1 := old.(*corev1.Pod)
			n, ok2 := obj.(*corev1.Pod)
			if ok1 && ok2 && n.Spec.NodeName == "" && !claimsNamed(o) && claimsNamed(n) {
				observe(n)
			}
		},
	})
	return err
}

// claimsNamed reports whether every claim of the pod has its name: one
// made from a template has it once the pod's status says it.
func claimsNamed(pod *corev1.Pod) bool {
	for i := range pod.Spec.ResourceClaims {
		if _, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i]); err != nil {
			return false
		}
	}
	return true
}

// Observe records a pod that arrived, asking for GPUs or not.
func (w *Workload) Observe(asksGPU bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.observeLocked(asksGPU)
}

// settleLocked counts the deferred pods whose claims the ledger has seen,
// oldest first, up to the first it has not (the oldest beyond
// maxDeferred regardless). w.mu is held.
func (w *Workload) settleLocked() {
	requests := *w.requests.Load()
	for len(w.deferred) > 0 {
		pod := w.deferred[0]
		if len(w.deferred) <= maxDeferred && !requests.ClaimsSeen(pod) {
			return
		}
		w.deferred[0] = nil
		w.deferred = w.deferred[1:]
		w.observeLocked(podkind.Of(requests.RequestOf(pod)) != config.PodKindCPU)
	}
}

// GPUNode reports whether a node has GPUs, for the plugins that let CPU
// pods yield GPU nodes to GPU work: the GPU ledger's answer, which counts
// the cards a DRA driver publishes too (gpuledger.State.GPUNode), else
// the node's allocatable nvidia.com/gpu. Counting only the allocatable,
// DRA GPU nodes read as CPU nodes, and CPU pods were spread over them.
func (w *Workload) GPUNode(ni fwk.NodeInfo) bool {
	if r := w.requests.Load(); r != nil {
		return (*r).GPUNode(ni)
	}
	return ni.GetAllocatable().GetScalarResources()[gpu.ResourceName] > 0
}

func (w *Workload) observeLocked(asksGPU bool) {
	if w.n == Window {
		if w.ring[w.next] {
			w.gpu--
		}
	} else {
		w.n++
	}
	w.ring[w.next] = asksGPU
	if asksGPU {
		w.gpu++
	}
	w.next = (w.next + 1) % Window
}

// GPUWork reports whether any of the last Window pods asked for GPUs.
func (w *Workload) GPUWork() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.deferred) > 0 {
		w.settleLocked()
	}
	return w.gpu > 0
}
