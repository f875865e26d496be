package deliver

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/aisched/aisched/pkg/gpu"
)

// Holding is what one live container holds: the cards the hook delivered
// to it, or, for a container the hook did not deliver to (its pod was
// placed by another scheduler, or it was created while the hook was away),
// the cards its environment names.
type Holding struct {
	// Pod is namespace/name, and PodUID its UID; empty when unknown.
	Pod, PodUID string
	Container   string
	UUIDs       []string
	// Share is nil for whole cards.
	Share *Share
	// Delivered is true when the hook chose the cards; false when they
	// are only read from the container.
	Delivered bool
}

// Holdings is the record of the cards live containers hold on this node,
// by container ID. It is rebuilt from the runtime's containers whenever the
// hook (re)connects, so it survives restarts of the agent and the runtime
// without a file of its own.
type Holdings struct {
	mu         sync.Mutex
	containers map[string]Holding
}

// NewHoldings returns an empty record.
func NewHoldings() *Holdings { return &Holdings{containers: map[string]Holding{}} }

// Reset replaces the record's content.
func (l *Holdings) Reset(byContainer map[string]Holding) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.containers = maps.Clone(byContainer)
	if l.containers == nil {
		l.containers = map[string]Holding{}
	}
}

// Add records that container id holds h.
func (l *Holdings) Add(id string, h Holding) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.containers[id] = h
}

// Remove forgets container id.
func (l *Holdings) Remove(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.containers, id)
}

// All returns every holding, by container ID.
func (l *Holdings) All() map[string]Holding {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.containers)
}

// Admit records that container id holds h, unless a card of h is held:
// whole by another pod, in shares by another pod when h is whole, or in
// shares that with h's would exceed the card's compute or memory (cards
// gives each card's memory). Containers of the same pod never conflict:
// they share the pod's cards by design. Check and record are one step, so
// two containers created at once cannot both take a card.
func (l *Holdings) Admit(id string, h Holding, cards []gpu.Card) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(h.PodUID, Delivery{UUIDs: h.UUIDs, Share: h.Share}, cards); err != nil {
		return err
	}
	l.containers[id] = h
	return nil
}

func (l *Holdings) checkLocked(podUID string, d Delivery, cards []gpu.Card) error {
	for _, u := range d.UUIDs {
		// The shares of the card held by other pods, one per pod.
		shares := map[string]Share{}
		for _, h := range l.containers {
			if h.PodUID != "" && h.PodUID == podUID || !slices.Contains(h.UUIDs, u) {
				continue
			}
			switch {
			case h.Share == nil:
				return fmt.Errorf("card %s is held whole by %s", u, h.describe())
			case d.Share == nil:
				return fmt.Errorf("card %s is shared by %s; a pod of whole cards needs it free", u, h.describe())
			}
			shares[h.describe()] = *h.Share
		}
		if d.Share == nil || len(shares) == 0 {
			continue
		}
		milli, mem := d.Share.Milli, d.Share.MemMiB
		for _, sh := range shares {
			milli += sh.Milli
			mem += sh.MemMiB
		}
		if milli > gpu.WholeCardMilli {
			return fmt.Errorf("card %s: %d thousandths of its compute would be held, by %s and this pod", u, milli, strings.Join(slices.Sorted(maps.Keys(shares)), ", "))
		}
		if i := slices.IndexFunc(cards, func(c gpu.Card) bool { return c.UUID == u }); i >= 0 && mem > cards[i].MemoryMiB {
			return fmt.Errorf("card %s: %d MiB of its %d MiB would be held, by %s and this pod", u, mem, cards[i].MemoryMiB, strings.Join(slices.Sorted(maps.Keys(shares)), ", "))
		}
	}
	return nil
}

func (h Holding) describe() string {
	who := "pod " + h.Pod
	if h.Pod == "" {
		who = "container " + h.Container
	}
	if !h.Delivered {
		who += " (its cards from the node's device plugin)"
	}
	return who
}
