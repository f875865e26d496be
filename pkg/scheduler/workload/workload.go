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
// claims; a claim made from a template after the pod arrived is not yet
// there, and such a pod counts as a CPU pod).
func (w *Workload) Start(factory informers.SharedInformerFactory, requests podkind.Requests) error {
	_, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName == "" {
				w.Observe(podkind.Of(requests.RequestOf(pod)) != config.PodKindCPU)
			}
		},
	})
	return err
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
