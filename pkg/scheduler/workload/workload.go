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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/aisched/aisched/apis/config"
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
}

// New returns an empty view; Start connects it to a scheduler.
func New() *Workload { return &Workload{} }

// Start follows the pods the scheduler's informer sees arrive; requests
// tells what each asks of GPUs (the GPU ledger, which reads a DRA pod's
// claims). A pod whose claims are made from templates is counted once the
// resourceclaim controller has named them on its status: before, they do
// not exist, and it would count as a CPU pod.
func (w *Workload) Start(factory informers.SharedInformerFactory, requests podkind.Requests) error {
	observe := func(pod *corev1.Pod) {
		w.Observe(podkind.Of(requests.RequestOf(pod)) != config.PodKindCPU)
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
	return w.gpu > 0
}
