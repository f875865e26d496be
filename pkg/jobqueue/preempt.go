package jobqueue

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/podgroup"
)

// maxUnits bounds the victims a plan considers for one group, so that a
// pass stays fast on a large cluster; the lowest-priority ones come first.
const maxUnits = 256

// unit is what is preempted at once: every bound member of a group, on
// whatever node, or one pod in no group. A group is preempted whole or
// not at all.
type unit struct {
	key      string
	priority int32
	pods     []podAt
	// ending: every pod is already being deleted; freeing it costs nothing.
	ending bool
}

type podAt struct {
	pod  *corev1.Pod
	room int
}

// mayPreempt reports whether the group's pods may preempt others: none of
// them says preemptionPolicy: Never.
func mayPreempt(g Group) bool {
	for _, p := range slices.Concat(g.Pending, g.Bound) {
		if p.Spec.PreemptionPolicy != nil && *p.Spec.PreemptionPolicy == corev1.PreemptNever {
			return false
		}
	}
	return true
}

// preemption finds the pods whose leaving lets need of the demands fit,
// among units (in the order they are to be chosen): pods already being
// deleted first, then whole units in order; units that turn out not to
// be needed are given back. It returns the pods to delete (none when the
// pods being deleted suffice) and where the demands fit then; ok is false
// when no choice fits, or when allow (when not nil) refuses the units
// chosen together: a reclaim takes no more from a queue than leaves it at
// its guarantee, or above the taker's share.
func preemption(demands []Demand, need int, rooms []Room, units []*unit, allow func(chosen []*unit) bool) (victims []*corev1.Pod, at placement, ok bool) {
	var ending, chosen []*unit
	for _, u := range units {
		if u.ending {
			ending = append(ending, u)
		}
	}
	fits := func(set []*unit) (placement, bool) {
		n, p := Fit(demands, freed(rooms, set), need)
		return p, n >= need
	}
	at, ok = fits(ending)
	for _, u := range units {
		if ok || len(chosen) == maxUnits {
			break
		}
		if u.ending {
			continue
		}
		chosen = append(chosen, u)
		at, ok = fits(slices.Concat(ending, chosen))
	}
	if !ok {
		return nil, placement{}, false
	}
	// Give back what is not needed, the last (dearest) chosen first.
	for i := len(chosen) - 1; i >= 0 && len(chosen) > 1; i-- {
		without := slices.Delete(slices.Clone(chosen), i, i+1)
		if p, ok := fits(slices.Concat(ending, without)); ok {
			chosen, at = without, p
		}
	}
	if allow != nil && !allow(chosen) {
		return nil, placement{}, false
	}
	for _, u := range chosen {
		for _, pa := range u.pods {
			victims = append(victims, pa.pod)
		}
	}
	return victims, at, true
}

// unitKey is the key of the unit a bound pod belongs to: its group's, or
// "pod <namespace>/<name>" for a pod in no group.
func unitKey(p *corev1.Pod) string {
	if key, ok := podgroup.KeyOf(p); ok {
		return key
	}
	return "pod " + p.Namespace + "/" + p.Name
}

// unitsOf gathers the bound pods of rooms into units, but g's own.
func unitsOf(g Group, rooms []Room) []*unit {
	byKey := map[string]*unit{}
	var order []*unit
	for r := range rooms {
		for _, p := range rooms[r].Pods {
			key := unitKey(p)
			if key == g.Key {
				continue
			}
			u := byKey[key]
			if u == nil {
				u = &unit{key: key, priority: corev1helpers.PodPriority(p), ending: true}
				byKey[key] = u
				order = append(order, u)
			}
			u.priority = max(u.priority, corev1helpers.PodPriority(p))
			u.ending = u.ending && p.DeletionTimestamp != nil
			u.pods = append(u.pods, podAt{pod: p, room: r})
		}
	}
	return order
}

// unknownCards reports whether a unit holds cards the ledger cannot name:
// it cannot be given back on paper.
func unknownCards(u *unit, demandOf func(*corev1.Pod) Demand) bool {
	return slices.ContainsFunc(u.pods, func(pa podAt) bool {
		d := demandOf(pa.pod)
		return d.requested > 0 && !d.holds
	})
}

// unitsBelow keeps the units g may preempt by priority, in the order
// they are chosen: units being deleted, and units of lower priority than
// g in the same team queue (same reports it by key), their cards known
// to the ledger; lowest priority first, fewest pods first, then the
// newest.
func unitsBelow(g Group, units []*unit, same func(key string) bool, demandOf func(*corev1.Pod) Demand) []*unit {
	out := slices.DeleteFunc(slices.Clone(units), func(u *unit) bool {
		if u.ending {
			return false
		}
		return u.priority >= g.Priority || !same(u.key) || unknownCards(u, demandOf)
	})
	slices.SortStableFunc(out, func(a, b *unit) int {
		return cmp.Or(cmp.Compare(a.priority, b.priority), cmp.Compare(len(a.pods), len(b.pods)),
			newestFirst(a, b), strings.Compare(a.key, b.key))
	})
	return out
}

func newestFirst(a, b *unit) int {
	created := func(u *unit) int64 {
		var latest int64
		for _, pa := range u.pods {
			latest = max(latest, pa.pod.CreationTimestamp.Unix())
		}
		return latest
	}
	return cmp.Compare(created(b), created(a))
}

// freed returns a copy of rooms without the pods of units: their
// resources and cards given back.
func freed(rooms []Room, units []*unit) []Room {
	work := slices.Clone(rooms)
	for _, u := range units {
		for _, pa := range u.pods {
			r := &work[pa.room]
			r.Free = r.Free.Add(RequestOf(pa.pod))
			if cards, _, ok := gpuledger.HoldingOf(pa.pod); ok {
				if req, err := gpu.ParseRequest(pa.pod); err == nil {
					r.GPUs.Give(req, cards)
				}
			}
		}
	}
	return work
}

// describeVictims says whom a group preempts, in plain words, bounded.
func describeVictims(victims []*corev1.Pod) string {
	groups := map[string]int{}
	var keys []string
	for _, p := range victims {
		key, ok := podgroup.KeyOf(p)
		if !ok {
			key = "pod " + p.Namespace + "/" + p.Name
		} else {
			key = "group " + key
		}
		if groups[key] == 0 {
			keys = append(keys, key)
		}
		groups[key]++
	}
	slices.Sort(keys)
	parts := make([]string, 0, min(len(keys), 5))
	for _, k := range keys[:min(len(keys), 5)] {
		if strings.HasPrefix(k, "group ") {
			parts = append(parts, fmt.Sprintf("%s (%d pods)", k, groups[k]))
		} else {
			parts = append(parts, k)
		}
	}
	if len(keys) > 5 {
		parts = append(parts, fmt.Sprintf("and %d more", len(keys)-5))
	}
	return strings.Join(parts, ", ")
}
