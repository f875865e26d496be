package gpuledger

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/aisched/aisched/pkg/gpu"
)

// ClusterFacts are cluster-wide values that change only when nodes or
// inventories change; computing them per scheduling cycle would cost a
// pass over every node.
type ClusterFacts struct {
	// Nodes and GPUNodes count all nodes and those that offer nvidia.com/gpu
	// or GPUs of a DRA driver.
	Nodes, GPUNodes int
	// BestComputeCapability, BestBandwidthGBps and BestClockMHz are the
	// best card values among GPU nodes; 0 when no card reports them.
	BestComputeCapability, BestBandwidthGBps, BestClockMHz float64
}

// ObserveNode records a node for the cluster facts; the node informer's
// add and update handler.
func (s *State) ObserveNode(obj interface{}) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, known := s.nodes[node.Name]
	s.nodes[node.Name] = node
	// The scheduler moves to the new object: cached Cards of the old ones
	// are garbage (a call still holding an old one recomputes).
	for _, n := range s.ptrs[node.Name] {
		if n != node {
			s.byNode.Delete(n)
		}
	}
	if _, ok := s.byNode.Load(node); ok {
		s.ptrs[node.Name] = []*corev1.Node{node}
	} else {
		delete(s.ptrs, node.Name)
	}
	// Heartbeats update nodes all the time; only GPU changes matter.
	if !known || isGPUNode(old) != isGPUNode(node) || !sameGFDLabels(old, node) {
		s.factsStale = true
	}
}

// ForgetNode forgets a deleted node; the node informer's delete handler.
func (s *State) ForgetNode(obj interface{}) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, node.Name)
	if e, ok := s.cards[node.Name]; ok {
		if e.inventory == nil && e.dra == nil {
			delete(s.cards, node.Name)
		} else {
			s.cards[node.Name] = nodeCards{inventory: e.inventory, dra: e.dra}
		}
	}
	s.dropCachedLocked(node.Name)
	s.goneLocked(node.Name)
}

func sameGFDLabels(a, b *corev1.Node) bool {
	for _, l := range gfdLabels {
		if a.Labels[l] != b.Labels[l] {
			return false
		}
	}
	return true
}

// isGPUNode: a node that offers nvidia.com/gpu.
func isGPUNode(node *corev1.Node) bool {
	q, ok := node.Status.Allocatable[gpu.ResourceName]
	return ok && q.Sign() > 0
}

// Facts returns the cluster-wide facts, recomputing them after a node or
// inventory change (one pass over the GPU nodes' cards).
func (s *State) Facts() ClusterFacts {
	s.mu.RLock()
	f, stale := s.facts, s.factsStale
	s.mu.RUnlock()
	if !stale {
		return f
	}
	s.mu.Lock()
	var gpuNodes []*corev1.Node
	for _, n := range s.nodes {
		// A node whose GPUs come from a DRA driver offers no
		// nvidia.com/gpu, but has cards all the same.
		if isGPUNode(n) || s.cards[n.Name].dra != nil {
			gpuNodes = append(gpuNodes, n)
		}
	}
	f = ClusterFacts{Nodes: len(s.nodes), GPUNodes: len(gpuNodes)}
	s.factsStale = false
	s.mu.Unlock()
	for _, n := range gpuNodes {
		set := s.Cards(n)
		if set == nil {
			continue
		}
		for _, c := range set.Cards {
			f.BestComputeCapability = max(f.BestComputeCapability, c.ComputeCapability)
			f.BestBandwidthGBps = max(f.BestBandwidthGBps, float64(c.BandwidthGBps))
			f.BestClockMHz = max(f.BestClockMHz, float64(c.ClockMHz))
		}
	}
	s.mu.Lock()
	// A change that raced with this pass marked the facts stale again.
	if !s.factsStale {
		s.facts = f
	}
	s.mu.Unlock()
	return f
}
