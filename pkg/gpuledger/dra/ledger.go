// Package dra is the DRA ledger: what a DRA driver publishes of GPUs in
// ResourceSlices (its devices, and the cards they are or are part of),
// the ResourceClaims allocated from them and the device classes, and the
// policies built on them: the best-fit order of a node's devices
// (order.go), what a pod's claims ask (request.go) and which nodes cannot
// hold it (room.go). It is the card ledger's (package gpuledger) one more
// source of cards and holdings: after every change of a node's devices or
// claims it reports the node's cards and what the claims hold of them
// (gpuledger.State.SetDRANode), so that every count of cards in aisched
// counts DRA GPUs too; the card ledger consults it through the
// gpuledger.DRA interface. README.md has the model and an example;
// docs/dra.md the user's view.
package dra

import (
	"context"
	"maps"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpuledger"
)

// DefaultDriver is the DRA driver whose devices are GPUs, unless the
// shared configuration names another (gpus.draDriver): NVIDIA's.
const DefaultDriver = "gpu.nvidia.com"

// Ledger is what aisched knows of the GPU driver's devices and of the
// claims allocated from them: one more source of cards (the devices of a
// node's slices) and one more source of holdings (allocated claims) for
// the card ledger. Create it with New.
type Ledger struct {
	// cards is the card ledger the Ledger reports to.
	cards  *gpuledger.State
	driver string

	// mu guards the maps below. It is held while the Ledger reports a
	// node to the card ledger, so that the reports arrive in order: the
	// card ledger's lock is taken inside it, never around it.
	mu sync.RWMutex
	// slices are the driver's node-local slices by name; byNode their
	// names by node.
	slices map[string]*resourceapi.ResourceSlice
	byNode map[string]map[string]bool
	// nodes are the nodes' cards and devices; poolNode is the node of each
	// pool.
	nodes    map[string]*nodeDevices
	poolNode map[string]string
	// claims are the claims that hold devices of the driver, allocated or
	// pending (the scheduler's Reserve to its PreBind); byPool their UIDs
	// by the pools of their devices.
	claims map[types.UID]*claimHold
	byPool map[string]map[types.UID]bool
	// usage is what the claims hold of each node's cards, free the devices
	// of each node no claim holds (or that take several), by shape key
	// (room.go). next counts the changes of a node's devices or usage,
	// and changed lists the last ones, oldest first (ChangedSince).
	usage   map[string]gpuledger.Usage
	free    map[string]map[string]int
	next    uint64
	changed []viewChange
	// named are the claims by namespace/name and classes the device
	// classes: what pods ask for (Request, NeverFits).
	named   map[string]*resourceapi.ResourceClaim
	classes map[string]*resourceapi.DeviceClass
	// shapes counts the devices of each shape, cluster-wide and per
	// node, for matching requests (request.go).
	shapes *shapeIndex
}

var _ gpuledger.DRA = &Ledger{}

// claimHold is a claim's hold on the driver's devices.
type claimHold struct {
	name    string // namespace/name
	results []resourceapi.DeviceRequestAllocationResult
	// pending: allocated by the scheduler, not yet written (Reserve).
	pending bool
	// pods are the pods the claim is reserved for (namespace/name).
	pods []string
}

// New returns the ledger of the devices of driver (empty: DefaultDriver),
// and makes it the DRA ledger of cards (gpuledger.State.UseDRA), which it
// reports each node's DRA cards and holdings to. Until started (through
// the card ledger's Start) it learns only through its Observe, Forget and
// Assume methods.
func New(cards *gpuledger.State, driver string) *Ledger {
	if driver == "" {
		driver = DefaultDriver
	}
	l := &Ledger{cards: cards, driver: driver, slices: map[string]*resourceapi.ResourceSlice{}, byNode: map[string]map[string]bool{},
		nodes: map[string]*nodeDevices{}, poolNode: map[string]string{}, claims: map[types.UID]*claimHold{},
		byPool: map[string]map[types.UID]bool{}, usage: map[string]gpuledger.Usage{}, free: map[string]map[string]int{},
		named: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{}, shapes: newShapeIndex(driver)}
	cards.UseDRA(l)
	return l
}

// Start follows the driver's slices, the claims and the device classes
// through the scheduler's informers; it returns what tells that each has
// seen its first list (gpuledger.DRA).
func (l *Ledger) Start(_ context.Context, factory informers.SharedInformerFactory) ([]cache.InformerSynced, error) {
	r := factory.Resource().V1()
	var synced []cache.InformerSynced
	for _, h := range []struct {
		informer        cache.SharedIndexInformer
		observe, forget func(interface{})
	}{
		{r.ResourceSlices().Informer(), l.ObserveSlice, l.ForgetSlice},
		{r.ResourceClaims().Informer(), l.ObserveClaim, l.ForgetClaim},
		{r.DeviceClasses().Informer(), l.ObserveClass, l.ForgetClass},
	} {
		reg, err := h.informer.AddEventHandler(handlers(h.observe, h.forget))
		if err != nil {
			return nil, err
		}
		synced = append(synced, reg.HasSynced)
	}
	return synced, nil
}

// Driver is the DRA driver whose devices the ledger counts as cards; ""
// for a nil Ledger.
func (l *Ledger) Driver() string {
	if l == nil {
		return ""
	}
	return l.driver
}

// ObserveSlice records the devices of one of the GPU driver's
// ResourceSlices; the slice informer's add and update handler. Slices of
// other drivers, and slices not local to one node, are not the ledger's.
func (l *Ledger) ObserveSlice(obj interface{}) {
	slice, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.slices[slice.Name]
	if slice.Spec.Driver != l.driver || ptr.Deref(slice.Spec.NodeName, "") == "" {
		if old != nil {
			l.dropSliceLocked(old)
		}
		return
	}
	node := *slice.Spec.NodeName
	if old != nil && ptr.Deref(old.Spec.NodeName, "") != node {
		l.dropSliceLocked(old)
	}
	l.slices[slice.Name] = slice
	if l.byNode[node] == nil {
		l.byNode[node] = map[string]bool{}
	}
	l.byNode[node][slice.Name] = true
	l.rebuildNodeLocked(node)
}

// ForgetSlice forgets a deleted slice; the slice informer's delete handler.
func (l *Ledger) ForgetSlice(obj interface{}) {
	slice, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.slices[slice.Name]; old != nil {
		l.dropSliceLocked(old)
	}
}

func (l *Ledger) dropSliceLocked(old *resourceapi.ResourceSlice) {
	delete(l.slices, old.Name)
	node := ptr.Deref(old.Spec.NodeName, "")
	delete(l.byNode[node], old.Name)
	if len(l.byNode[node]) == 0 {
		delete(l.byNode, node)
	}
	l.rebuildNodeLocked(node)
}

// rebuildNodeLocked rebuilds a node's cards and devices from its slices.
func (l *Ledger) rebuildNodeLocked(node string) {
	var list []*resourceapi.ResourceSlice
	for _, name := range slices.Sorted(maps.Keys(l.byNode[node])) {
		list = append(list, l.slices[name])
	}
	if old := l.nodes[node]; old != nil {
		l.shapes.remove(node, old)
		for _, p := range old.pools() {
			if l.poolNode[p] == node {
				delete(l.poolNode, p)
			}
		}
	}
	n := buildNode(l.driver, list)
	if n == nil {
		delete(l.nodes, node)
	} else {
		l.nodes[node] = n
		for _, p := range n.pools() {
			l.poolNode[p] = node
		}
		l.shapes.add(node, n)
	}
	l.recomputeUsageLocked(node)
}

// pools lists the pools of a node's devices.
func (n *nodeDevices) pools() []string {
	seen := map[string]bool{}
	for ref := range n.devices {
		seen[ref.Pool] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// Of returns the DRA ledger of the card ledger cards (New); nil when it
// has none.
func Of(cards *gpuledger.State) *Ledger {
	l, _ := cards.DRA().(*Ledger)
	return l
}

// handlers calls observe on adds and updates, forget on deletes.
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
