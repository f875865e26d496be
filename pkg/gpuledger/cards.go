package gpuledger

import (
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
)

// gfdLabels are the labels the fallback inventory is built from.
var gfdLabels = [...]string{gpu.GFDCountLabel, gpu.GFDMemoryLabel, gpu.GFDProductLabel, gpu.GFDComputeMajorLabel, gpu.GFDComputeMinorLabel}

// nodeCards is what is known of a node's cards; the map holds it by value
// so that a lookup costs no extra pointer to follow.
type nodeCards struct {
	// inventory is the node's GPUInventory, converted; nil when it has none.
	inventory *gpu.Set
	// dra is the cards of the node's DRA devices, as the DRA ledger
	// reports them (SetDRANode); nil when the driver publishes none.
	dra *gpu.Set
	// fromLabels is the set built from the label values in labels.
	fromLabels *gpu.Set
	labels     [len(gfdLabels)]string
	labelsRead bool
}

// ObserveInventory records the cards of a GPUInventory; the inventory
// informer's add and update handler.
func (s *State) ObserveInventory(obj interface{}) {
	inv, ok := obj.(*aischedv1alpha1.GPUInventory)
	if !ok {
		return
	}
	set := gpu.NewSet(gpu.FromInventory(inv))
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.cards[inv.Name]
	e.inventory = set
	s.cards[inv.Name] = e
	s.dropCachedLocked(inv.Name)
}

// ForgetInventory forgets a deleted GPUInventory.
func (s *State) ForgetInventory(obj interface{}) {
	inv, ok := obj.(*aischedv1alpha1.GPUInventory)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.cards[inv.Name]; ok {
		e.inventory = nil
		s.cards[inv.Name] = e
	}
	s.dropCachedLocked(inv.Name)
}

// dropCachedLocked forgets the cached Cards of a node after its cards
// changed; s.mu must be held for writing.
func (s *State) dropCachedLocked(name string) {
	for _, n := range s.ptrs[name] {
		s.byNode.Delete(n)
	}
	delete(s.ptrs, name)
	s.changedLocked(name)
	s.gen++
	s.factsStale = true
}

// Cards returns the cards of a node: its GPUInventory when there is one,
// else the GPUs its DRA driver publishes, else its GPU Feature Discovery
// labels unless those are turned off, else nil. The Set is shared; callers must not modify it.
func (s *State) Cards(node *corev1.Node) *gpu.Set {
	if cached, ok := s.byNode.Load(node); ok {
		return cached.(*gpu.Set)
	}
	s.mu.RLock()
	gen := s.gen
	s.mu.RUnlock()
	set := s.cardsByName(node, gen)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Cache only what no inventory or node change has overtaken meanwhile.
	if s.gen == gen {
		s.byNode.Store(node, set)
		s.ptrs[node.Name] = append(s.ptrs[node.Name], node)
	}
	return set
}

// GPUNode reports whether a node has GPUs: cards in its allocatable
// (nvidia.com/gpu), or cards the GPU driver publishes through DRA, which
// the allocatable does not show. Scores ask it for every node in every
// cycle: on a cluster without DRA GPUs it costs one atomic load more than
// reading the allocatable.
func (s *State) GPUNode(ni fwk.NodeInfo) bool {
	if ni.GetAllocatable().GetScalarResources()[gpu.ResourceName] > 0 {
		return true
	}
	if s.draNodes.Load() == 0 {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cards[ni.Node().Name].dra != nil
}

// cardsByName is Cards without the cache by node object; gen is the
// generation the caller read.
func (s *State) cardsByName(node *corev1.Node, gen uint64) *gpu.Set {
	s.mu.RLock()
	e, noLabels := s.cards[node.Name], s.noLabels
	s.mu.RUnlock()
	if e.inventory != nil {
		return e.inventory
	}
	if e.dra != nil {
		return e.dra
	}
	if noLabels {
		return nil
	}
	var labels [len(gfdLabels)]string
	for i, l := range gfdLabels {
		labels[i] = node.Labels[l]
	}
	if e.labelsRead && e.labels == labels {
		return e.fromLabels
	}
	set := gpu.NewSet(gpu.FromNodeLabels(node))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		// The node or its inventory changed meanwhile (it may be gone):
		// answer, but remember nothing.
		return set
	}
	updated := s.cards[node.Name]
	updated.fromLabels, updated.labels, updated.labelsRead = set, labels, true
	s.cards[node.Name] = updated
	if updated.inventory != nil {
		// An inventory arrived meanwhile; it wins.
		return updated.inventory
	}
	if updated.dra != nil {
		return updated.dra
	}
	return set
}
