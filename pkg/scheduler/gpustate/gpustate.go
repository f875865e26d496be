// Package gpustate is the GPU view that aisched's scheduler plugins share
// within one scheduler: the cards of every node (GPUInventory, or GPU
// Feature Discovery labels when a node has none) and which pod holds which
// card. Profiles have their own plugin instances, so the view must be shared
// for two profiles never to give the same card away; it lives as long as
// the scheduler's plugin registry (scheduler.Registry), not the process.
package gpustate

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/klog/v2"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/generated/informers/externalversions"
	listers "github.com/aisched/aisched/pkg/generated/listers/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
)

// InventoryEvent is the scheduler event resource of GPUInventory objects,
// <plural>.<version>.<group> as the scheduler's dynamic informers want it.
const InventoryEvent fwk.EventResource = "gpuinventories.v1alpha1.aisched.io"

// syncTimeout bounds the wait for the inventory cache at scheduler start.
const syncTimeout = 30 * time.Second

// State is the shared GPU view. The zero value is not usable; use New.
type State struct {
	once    sync.Once
	initErr error
	// inventories is nil when the GPUInventory CRD is not installed.
	inventories listers.GPUInventoryLister

	mu sync.RWMutex
	// pods maps pod UID to the cards it holds.
	pods map[types.UID]holding
}

type holding struct {
	node  string
	cards []int
}

// New returns an empty State, to be connected to a scheduler with Init.
func New() *State {
	return &State{pods: map[types.UID]holding{}}
}

// NewStatic returns a State that reads inventories from the lister (nil:
// GPU Feature Discovery labels only) and learns of pods only through
// ObservePod, ForgetPod and Assign; Init does nothing. It serves unit tests
// and tools without a scheduler.
func NewStatic(inventories listers.GPUInventoryLister) *State {
	s := New()
	s.inventories = inventories
	s.once.Do(func() {})
	return s
}

// Init connects the State to the scheduler, once: it starts a GPUInventory
// informer when the CRD is served, and follows pods through the
// scheduler's pod informer so that cards held by bound pods are known,
// also after a restart. Later calls return the first call's result.
func (s *State) Init(ctx context.Context, h fwk.Handle) error {
	s.once.Do(func() { s.initErr = s.init(ctx, h) })
	return s.initErr
}

func (s *State) init(ctx context.Context, h fwk.Handle) error {
	logger := klog.FromContext(ctx)
	client, err := versioned.NewForConfig(h.KubeConfig())
	if err != nil {
		return err
	}
	// Without the CRD an informer would never sync and block the scheduler.
	_, err = client.Discovery().ServerResourcesForGroupVersion(aischedv1alpha1.SchemeGroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		logger.Info("GPUInventory CRD not installed; reading GPUs from GPU Feature Discovery labels only (apply deploy/crds and restart to use inventories)")
	case err != nil:
		return fmt.Errorf("discover %s: %w", aischedv1alpha1.SchemeGroupVersion, err)
	default:
		factory := externalversions.NewSharedInformerFactory(client, 0)
		informer := factory.Aisched().V1alpha1().GPUInventories()
		s.inventories = informer.Lister()
		factory.Start(ctx.Done())
		syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
		defer cancel()
		if !cache.WaitForCacheSync(syncCtx.Done(), informer.Informer().HasSynced) {
			return fmt.Errorf("GPUInventory cache not synced after %s", syncTimeout)
		}
	}
	_, err = h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.ObservePod,
		UpdateFunc: func(_, obj interface{}) { s.ObservePod(obj) },
		DeleteFunc: s.ForgetPod,
	})
	return err
}

// InventoryServed reports whether GPUInventory objects are read.
func (s *State) InventoryServed() bool { return s.inventories != nil }

// ObservePod records the cards of a bound, running pod from its assigned
// annotation, and forgets the pod once it has ended. It is the pod
// informer's add and update handler.
func (s *State) ObservePod(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		s.Release(pod.UID, "")
		return
	}
	if pod.Spec.NodeName == "" {
		// An unbound pod may carry the annotation of an attempt that failed
		// to bind; only binding makes it true.
		return
	}
	cards, ok := gpu.ParseIndices(pod.Annotations[gpu.AssignedAnnotation])
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[pod.UID] = holding{node: pod.Spec.NodeName, cards: cards}
}

// ForgetPod forgets a deleted pod's cards; the pod informer's delete handler.
func (s *State) ForgetPod(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		s.Release(pod.UID, "")
	}
}

// Cards returns the cards of a node: its GPUInventory when there is one,
// else its GPU Feature Discovery labels when useLabels, else none.
func (s *State) Cards(node *corev1.Node, useLabels bool) []gpu.Card {
	if s.inventories != nil {
		if inv, err := s.inventories.Get(node.Name); err == nil {
			return gpu.FromInventory(inv)
		}
	}
	if useLabels {
		return gpu.FromNodeLabels(node)
	}
	return nil
}

// Assign records that the pod holds the cards of node (Reserve).
func (s *State) Assign(uid types.UID, node string, cards []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[uid] = holding{node: node, cards: cards}
}

// Release forgets the pod's cards. With a node name it only forgets cards
// on that node (Unreserve of a placement that was replaced does nothing).
func (s *State) Release(uid types.UID, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.pods[uid]; ok && (node == "" || h.node == node) {
		delete(s.pods, uid)
	}
}

// Held returns the cards the pod holds and on which node.
func (s *State) Held(uid types.UID) (node string, cards []int, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.pods[uid]
	return h.node, h.cards, ok
}

// Usage is what the pods of a node hold.
type Usage struct {
	// Used is the set of card indices held by pods with a known assignment.
	Used map[int]bool
	// Unknown counts the cards held by GPU pods that no aisched profile
	// placed (another scheduler's): which cards they have is not known.
	Unknown int64
}

// Usage returns the cards held by the pods of nodeInfo, leaving out the
// pod being placed (UID skip, requesting skipGPUs cards) should the node
// already list it. It reads the node's pods from nodeInfo, so that
// preemption's what-if copies (victims removed) are honoured.
func (s *State) Usage(nodeInfo fwk.NodeInfo, skip types.UID, skipGPUs int64) Usage {
	u := Usage{Used: map[int]bool{}}
	requested := nodeInfo.GetRequested().GetScalarResources()[gpu.ResourceName]
	var known int64
	s.mu.RLock()
	for _, pi := range nodeInfo.GetPods() {
		pod := pi.GetPod()
		if pod.UID == skip {
			requested -= skipGPUs
			continue
		}
		if h, ok := s.pods[pod.UID]; ok && h.node == nodeInfo.Node().Name {
			for _, c := range h.cards {
				u.Used[c] = true
			}
			known += int64(len(h.cards))
		}
	}
	s.mu.RUnlock()
	u.Unknown = max(requested-known, 0)
	return u
}
