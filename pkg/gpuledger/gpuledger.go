// Package gpuledger is aisched's one GPU ledger: the cards of every node
// (GPUInventory, else the devices a DRA driver publishes in ResourceSlices,
// else GPU Feature Discovery labels), which pod holds which card or which
// share of one (pods' records, and allocated ResourceClaims), the choice
// of cards for a pod, and cluster-wide facts such as the share of GPU
// nodes. DRA is one more source of cards and holdings: the DRA ledger
// (package gpuledger/dra, behind the DRA interface of dra.go; docs/dra.md)
// reports each node's DRA cards and what claims hold of them, so every
// count below counts DRA GPUs too. README.md has the model and a worked
// example.
//
// One State serves a whole scheduler: it is part of the state every
// profile shares (scheduler.Shared), built once from its own configuration
// before the profiles, so that two profiles never give the same card away
// and never disagree on what a node has. Every count of cards in aisched
// is made here: the plugins' filters, scores and reservations, the job
// queue's and Coscheduling's whole-group placement (NodeGPUs), and the
// simulator's checks (Audit). GPUFit is the one plugin that records a
// choice (Assign); a plugin that weighs cards, such as FGD, proposes one
// through CardProposer.
//
// Everything is kept up to date by informer event handlers, so that the
// plugins' Filter and Score read a node's cards and usage in a few map
// lookups, with nothing converted or allocated per call. Each node's
// record has a version (VersionOf) that every change of its cards or
// holdings moves: with the NodeInfo's generation it tells a plugin that
// remembers what it computed per node (NodeMemo) when to compute again,
// so that scoring a node that did not change costs a comparison. The
// priorities of the pods that hold cards (HolderBelow) tell whether
// preemption could free any for a pod.
package gpuledger

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/generated/informers/externalversions"
	"github.com/aisched/aisched/pkg/util/crdwatch"
)

// InventoryEvent is the scheduler event resource of GPUInventory objects,
// <plural>.<version>.<group> as the scheduler's dynamic informers want it.
const InventoryEvent fwk.EventResource = "gpuinventories.v1alpha1.aisched.io"

// syncTimeout bounds the wait for the inventory cache at scheduler start.
const syncTimeout = 30 * time.Second

// Options configure a State; they are the shared configuration's gpus
// section.
type Options struct {
	// NoFeatureDiscoveryLabels turns off the GPU Feature Discovery
	// fallback: a node without a GPUInventory has no cards.
	NoFeatureDiscoveryLabels bool
}

// State is the shared GPU view. Create it with New or NewStandalone.
type State struct {
	once     sync.Once
	startErr error
	// inventoryServed is false when the GPUInventory CRD is not installed.
	inventoryServed bool

	// noLabels turns off the GPU Feature Discovery fallback.
	noLabels bool

	mu sync.RWMutex
	// pods maps pod UID to the cards it holds.
	pods map[types.UID]holding
	// held is what is known of each node's holdings, by node name; a node
	// without holdings has no entry.
	held map[string]*heldOn
	// cards holds what is known of each node's cards, by node name.
	cards map[string]nodeCards
	// byNode caches Cards by node object (*corev1.Node to *gpu.Set): the
	// scheduler hands the same *Node to every Filter and Score call until
	// the node changes, and a pointer hashes far faster than a name. This
	// lookup runs for every node in every cycle, from parallel Filter
	// goroutines, so it is a sync.Map, read without s.mu; it is written only
	// with s.mu held. ptrs lists the cached objects of each node name, and
	// gen counts inventory changes, so that a change drops stale entries.
	byNode sync.Map
	ptrs   map[string][]*corev1.Node
	gen    uint64
	// nodes are the cluster's nodes, for the cluster-wide facts.
	nodes map[string]*corev1.Node
	// facts is recomputed when stale (a node or an inventory changed).
	facts      ClusterFacts
	factsStale bool

	// synced reports whether the inventory, pod and node handlers have
	// seen every object of the informers' first list; isSynced caches a
	// yes.
	synced   []cache.InformerSynced
	isSynced atomic.Bool

	// versions count each node's changes (VersionOf).
	versions map[string]*atomic.Uint64
	// gone are the NodeMemos' hooks for deleted nodes.
	gone []func(node string)
	// prio counts the pods that hold cards by priority (HolderBelow),
	// bound every pod bound to a node (PodBelow).
	prio, bound priorities

	// proposers are the card proposers by profile (framework handle).
	proposers sync.Map // fwk.Handle -> namedProposer

	// dra is the ledger of the DRA driver's devices and the claims
	// allocated from them (dra.go); nil without. draUsage is what the
	// claims hold of each node's cards, as it last said (SetDRANode);
	// draNodes counts the nodes whose cards it publishes, read without
	// s.mu.
	dra      DRA
	draUsage map[string]Usage
	draNodes atomic.Int64
}

// New returns an empty State, to be connected to a scheduler with Start.
func New(opts Options) *State {
	return &State{
		noLabels: opts.NoFeatureDiscoveryLabels,
		pods:     map[types.UID]holding{},
		held:     map[string]*heldOn{},
		cards:    map[string]nodeCards{},
		ptrs:     map[string][]*corev1.Node{},
		nodes:    map[string]*corev1.Node{},
		versions: map[string]*atomic.Uint64{},
		draUsage: map[string]Usage{},
	}
}

// NewStandalone returns a State that is not connected to a scheduler: it
// learns only through its Observe, Forget and Assign methods, and Start
// does nothing. It serves unit tests, benchmarks and tools (the
// simulator's checks).
func NewStandalone(opts Options) *State {
	s := New(opts)
	s.inventoryServed = true
	s.once.Do(func() {})
	return s
}

// Start connects the State to a scheduler, once: it follows GPUInventories
// (when the CRD is served, through client), nodes and pods through the
// scheduler's informers, so that the cards of bound pods are known, also
// after a restart. Later calls return the first call's result.
func (s *State) Start(ctx context.Context, client versioned.Interface, factory informers.SharedInformerFactory) error {
	s.once.Do(func() { s.startErr = s.start(ctx, client, factory) })
	return s.startErr
}

func (s *State) start(ctx context.Context, client versioned.Interface, factory informers.SharedInformerFactory) error {
	logger := klog.FromContext(ctx)
	informer, err := crdwatch.Start(ctx, client, aischedv1alpha1.SchemeGroupVersion.WithResource("gpuinventories"), syncTimeout,
		func(f externalversions.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Aisched().V1alpha1().GPUInventories().Informer()
		})
	switch {
	case err != nil:
		return err
	case informer == nil:
		logger.Info("GPUInventory CRD not installed; reading GPUs from GPU Feature Discovery labels only (install aisched's CRDs with aisched crds and restart to use inventories)")
	default:
		s.inventoryServed = true
		// Registered on a synced informer, the handler first sees every
		// inventory as added.
		reg, err := informer.AddEventHandler(handlers(s.ObserveInventory, s.ForgetInventory))
		if err != nil {
			return err
		}
		// The handler sees the informer's list after AddEventHandler
		// returns: until it has, nodes would look as if they had no cards.
		s.synced = append(s.synced, reg.HasSynced)
	}
	core := factory.Core().V1()
	pods, err := core.Pods().Informer().AddEventHandler(handlers(s.ObservePod, s.ForgetPod))
	if err != nil {
		return err
	}
	nodes, err := core.Nodes().Informer().AddEventHandler(handlers(s.ObserveNode, s.ForgetNode))
	if err != nil {
		return err
	}
	s.synced = append(s.synced, pods.HasSynced, nodes.HasSynced)
	if s.dra == nil {
		return nil
	}
	dra, err := s.dra.Start(ctx, factory)
	if err != nil {
		return err
	}
	s.synced = append(s.synced, dra...)
	return nil
}

// HasSynced reports whether the State has seen every GPUInventory, pod and
// node the informers first listed (a State not connected to a scheduler
// has).
func (s *State) HasSynced() bool {
	if s.isSynced.Load() {
		return true
	}
	for _, synced := range s.synced {
		if !synced() {
			return false
		}
	}
	s.isSynced.Store(true)
	return true
}

// WaitSynced waits, at most syncTimeout, until the State has seen every
// GPUInventory, pod and node the informers first listed (HasSynced). The scheduler waits
// only for its own handlers before it schedules; a plugin that placed a
// pod before this State saw the bound ones could give a card, or a share
// of one, twice. It reports whether the State is synced; once it is, the
// call costs one atomic load.
func (s *State) WaitSynced(ctx context.Context) bool {
	if s.isSynced.Load() {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), s.HasSynced)
}

func handlers(observe, forget func(interface{})) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj interface{}) { observe(obj) },
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			forget(obj)
		},
	}
}

// InventoryServed reports whether GPUInventory objects are followed.
func (s *State) InventoryServed() bool { return s.inventoryServed }
