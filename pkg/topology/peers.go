package topology

import (
	"context"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
)

// startPeers follows the peers' topologies whose CRDs are served.
func (s *Source) startPeers(context.Context, versioned.Interface, dynamic.Interface, cache.ResourceEventHandlerFuncs) error {
	return nil
}

// peerTopologies translates the peers' topologies into the model.
func (s *Source) peerTopologies() []*Topology { return nil }

// ofVolcano reads a Volcano PodGroup's spec.networkTopology.
func ofVolcano(map[string]interface{}) (Constraint, bool, error) { return Constraint{}, false, nil }
