package gpuledger

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
)

// CardProposer is a plugin that weighs each card of a node, such as FGD:
// it proposes the card that a pod sharing one should get. GPUFit stays the
// one owner of card choice: its Reserve asks the profile's proposer for
// the node it was given, takes the proposal only when the card meets the
// request and has room, and otherwise picks by the ledger's own policy
// (Usage.Pick). A proposer never records anything in the ledger.
type CardProposer interface {
	// ProposeCard returns the index of the card on ni for the share r of
	// pod, or ok false for no proposal. It is called from Reserve, once
	// per pod, for the node the scheduler chose, whether or not the
	// proposer scored that node in the cycle (the scheduler skips scoring
	// when one node is feasible). cs is the pod's cycle state.
	ProposeCard(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, r gpu.Request, ni fwk.NodeInfo) (index int, ok bool)
}

type namedProposer struct {
	name string
	CardProposer
}

// SetProposer makes p, the plugin named name, the card proposer of the
// profile of h (each profile has its own framework handle). A profile
// has at most one: a second is an error that names both.
func (s *State) SetProposer(h fwk.Handle, name string, p CardProposer) error {
	if prev, loaded := s.proposers.LoadOrStore(h, namedProposer{name: name, CardProposer: p}); loaded {
		return fmt.Errorf("%s and %s both propose GPU cards in one profile; enable one of them", prev.(namedProposer).name, name)
	}
	return nil
}

// Proposer returns the card proposer of the profile of h, nil when it has
// none.
func (s *State) Proposer(h fwk.Handle) CardProposer {
	if p, ok := s.proposers.Load(h); ok {
		return p.(namedProposer).CardProposer
	}
	return nil
}
