package gpuledger

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/aisched/aisched/pkg/gpu"
)

// Audit checks the cards that running pods hold, read from their own
// records as a restarted scheduler reads them (HoldingOf), against the
// cards of their nodes: a card is held whole by one pod at most and never
// whole beside a share, the shares of a card stay within its compute and
// memory, and no pod holds a card its node does not have. cards returns a
// node's cards (nil for none). Pods are taken in the order given; the
// result lists every violation, nil when there is none. The simulator
// runs it on every run, and compares it with the simulated kubelets'
// own ledger, so that a number is never reported from an overcommitted
// cluster.
func Audit(cards func(node string) *gpu.Set, pods []*corev1.Pod) []string {
	var problems []string
	usage := map[string]Usage{}
	for pod, h := range running(pods) {
		held, share, node := h.cards, h.share, h.node
		set := cards(node)
		u := usage[node]
		for _, idx := range held {
			c := (*gpu.Card)(nil)
			if set != nil {
				c = gpu.CardByIndex(set.Cards, idx)
			}
			switch {
			case c == nil:
				problems = append(problems, fmt.Sprintf("pod %s/%s holds card %d of node %s, which has no such card", pod.Namespace, pod.Name, idx, node))
			case share.IsZero() && u.Used(idx):
				problems = append(problems, fmt.Sprintf("pod %s/%s holds card %d of node %s whole, which another pod holds", pod.Namespace, pod.Name, idx, node))
			case !share.IsZero() && u.Whole(idx):
				problems = append(problems, fmt.Sprintf("pod %s/%s shares card %d of node %s, which another pod holds whole", pod.Namespace, pod.Name, idx, node))
			case !share.IsZero() && (u.HeldMilli(idx)+share.Milli > gpu.WholeCardMilli || share.MemMiB > 0 && u.HeldMemMiB(idx)+share.MemMiB > c.MemoryMiB):
				problems = append(problems, fmt.Sprintf("pod %s/%s shares card %d of node %s beyond its compute or memory (held %d thousandths and %d MiB, adding %d and %d)",
					pod.Namespace, pod.Name, idx, node, u.HeldMilli(idx), u.HeldMemMiB(idx), share.Milli, share.MemMiB))
			}
		}
		usage[node] = u.With(held, share)
	}
	return problems
}

// Holders lists, for each card of each node, who holds it: "ns/pod" for a
// whole card, "ns/pod@milli/memMiB" for a share, sorted, keyed by
// "node/index". It is the ledger as a table, for comparing with another
// party's (the simulated kubelets').
func Holders(pods []*corev1.Pod) map[string]string {
	out := map[string][]string{}
	for pod, h := range running(pods) {
		who := pod.Namespace + "/" + pod.Name
		if !h.share.IsZero() {
			who += fmt.Sprintf("@%d/%d", h.share.Milli, h.share.MemMiB)
		}
		for _, idx := range h.cards {
			key := fmt.Sprintf("%s/%d", h.node, idx)
			out[key] = append(out[key], who)
		}
	}
	table := make(map[string]string, len(out))
	for k, v := range out {
		slices.Sort(v)
		table[k] = strings.Join(v, ",")
	}
	return table
}

// running yields the pods that have not ended and hold cards, with what
// they hold (HoldingOf).
func running(pods []*corev1.Pod) iter.Seq2[*corev1.Pod, holding] {
	return func(yield func(*corev1.Pod, holding) bool) {
		for _, pod := range pods {
			if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			cards, share, ok := HoldingOf(pod)
			if ok && !yield(pod, holding{node: pod.Spec.NodeName, cards: cards, share: share}) {
				return
			}
		}
	}
}
