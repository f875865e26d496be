package topology

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/generated/informers/externalversions"
	"github.com/aisched/aisched/pkg/util/crdwatch"
)

// syncTimeout bounds the wait for the topologies' caches at start.
const syncTimeout = 30 * time.Second

// Source follows the topologies: aisched's Topologies (aischedtopologies)
// and, when their CRDs are served, the peers' (peers.go), each translated
// into the model at this edge.
type Source struct {
	aisched cache.Indexer
	peers   peerStores
	synced  []cache.InformerSynced

	mu    sync.Mutex
	stale bool
	list  []*Topology
}

// Start follows the topologies through client (nil: none) and dyn (nil:
// no peers'); nodes are the nodes Volcano's HyperNodes select. onChange is
// called on every change.
func (s *Source) Start(ctx context.Context, client versioned.Interface, dyn dynamic.Interface, nodes corelisters.NodeLister, onChange func()) error {
	s.stale = true
	s.peers.nodes = nodes
	if client == nil {
		return nil
	}
	changed := crdwatch.OnChange(func() { s.invalidate(); onChange() })
	indexer, synced, err := crdwatch.Watch(ctx, client, aischedv1alpha1.SchemeGroupVersion.WithResource("aischedtopologies"), syncTimeout,
		func(f externalversions.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Aisched().V1alpha1().AischedTopologies().Informer()
		}, changed)
	if err != nil {
		return err
	}
	if indexer != nil {
		s.aisched = indexer
		s.synced = append(s.synced, synced)
	}
	return s.startPeers(ctx, client, dyn, changed)
}

// Synced are the handlers' HasSynced.
func (s *Source) Synced() []cache.InformerSynced { return s.synced }

func (s *Source) invalidate() {
	s.mu.Lock()
	s.stale = true
	s.mu.Unlock()
}

// Topologies returns the topologies in name order, aisched's first; the
// list and its topologies must not be changed.
func (s *Source) Topologies() []*Topology {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stale {
		return s.list
	}
	s.stale = false
	var list []*Topology
	if s.aisched != nil {
		for _, obj := range s.aisched.List() {
			if t, ok := obj.(*aischedv1alpha1.Topology); ok {
				list = append(list, OfAPI(t))
			}
		}
	}
	slices.SortFunc(list, func(a, b *Topology) int { return strings.Compare(a.Name, b.Name) })
	s.list = append(list, s.peerTopologies()...)
	return s.list
}

// OfAPI translates aisched's Topology into the model.
func OfAPI(t *aischedv1alpha1.Topology) *Topology {
	labels := make([]string, 0, len(t.Spec.Levels))
	for _, l := range t.Spec.Levels[:min(len(t.Spec.Levels), MaxLevels)] {
		labels = append(labels, l.NodeLabel)
	}
	return OfLabels(t.Name, "aischedtopology "+t.Name, labels)
}

// NodesChanged tells the source that nodes came, went or changed their
// labels: Volcano's HyperNodes select nodes by name and label, so their
// topology is translated again.
func (s *Source) NodesChanged() {
	if s.peers.volcano != nil {
		s.invalidate()
	}
}
