package gpustate

import (
	"sync"

	fwk "k8s.io/kube-scheduler/framework"
)

// CardChoiceKey is the CycleState key of a CardChoice.
const CardChoiceKey fwk.StateKey = "aisched.io/gpu-card-choice"

// CardChoice is how a plugin that weighs each card of a node (the FGD
// plugin) tells GPUFit's Reserve which card of the chosen node a shared
// pod should get: the card it scored the node with, or, when the
// scheduler skipped scoring (one feasible node), the card its choose
// function picks. Score runs for many nodes at once, so it is safe for
// concurrent use. Reserve takes the choice only when the card still has
// room; otherwise it picks as usual.
type CardChoice struct {
	choose func(fwk.NodeInfo) (int, bool)

	mu     sync.Mutex
	byNode map[string]int
}

// NewCardChoice returns an empty CardChoice that falls back on choose for
// nodes it has no card for; choose may be nil.
func NewCardChoice(choose func(fwk.NodeInfo) (int, bool)) *CardChoice {
	return &CardChoice{choose: choose, byNode: map[string]int{}}
}

// Clone implements fwk.StateData: one cycle's choices are shared by the
// copies of its state (preemption's what-if copies do not score).
func (c *CardChoice) Clone() fwk.StateData { return c }

// Set records the card chosen on node.
func (c *CardChoice) Set(node string, card int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byNode[node] = card
}

// Get returns the card chosen on node, or the one choose picks.
func (c *CardChoice) Get(ni fwk.NodeInfo) (card int, ok bool) {
	c.mu.Lock()
	card, ok = c.byNode[ni.Node().Name]
	c.mu.Unlock()
	if !ok && c.choose != nil {
		return c.choose(ni)
	}
	return card, ok
}

// ReadCardChoice returns the cycle's CardChoice, nil when no plugin wrote one.
func ReadCardChoice(cs fwk.CycleState) *CardChoice {
	s, err := cs.Read(CardChoiceKey)
	if err != nil {
		return nil
	}
	c, _ := s.(*CardChoice)
	return c
}
