package whatif

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteText writes the answer in plain words; now is when the snapshot
// was taken, for times relative to it.
func (a *Answer) WriteText(w io.Writer, now time.Time) error {
	var b strings.Builder
	if s := a.Submitted; s != nil {
		fmt.Fprintf(&b, "The job is in the cluster already: %d of its %d pods exist, %d bound. What the cluster says of it now:\n", s.Pods, len(a.Pods), s.Bound)
		for _, line := range s.Says {
			fmt.Fprintf(&b, "  - %s\n", line)
		}
		b.WriteString("What the simulation of the cluster finds:\n")
	}
	switch a.Verdict {
	case FitsNow:
		switch s := a.Submitted; {
		case s != nil && s.Bound == len(a.Pods):
			b.WriteString("The job is placed: every pod is bound.\n")
		case s != nil:
			b.WriteString("The job fits now: the scheduler places it at its next attempt (the pods wait out a backoff, or the job queue's next pass).\n")
		default:
			b.WriteString("The job fits now.\n")
		}
	case FitsAfterPreemption:
		if q := a.Queue; q != nil && len(q.TakenBack) > 0 {
			fmt.Fprintf(&b, "The job fits now by taking back %d running pods that other queues borrowed:\n", len(a.Preempted))
			for _, t := range q.TakenBack {
				fmt.Fprintf(&b, "  - %s\n", t)
			}
			break
		}
		fmt.Fprintf(&b, "The job fits now by preempting %d running pods of lower priority:\n", len(a.Preempted))
		for _, p := range a.Preempted {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
	case FitsLater:
		fmt.Fprintf(&b, "The job does not fit now. It fits in %s (at %s), once these running pods end:\n",
			a.At.Sub(now).Round(time.Second), a.At.UTC().Format(time.RFC3339))
		for _, p := range a.After {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
	case NotWithinHorizon:
		b.WriteString("The job does not fit now, nor after every running pod whose end is known has ended; it would fit the cluster with fewer pods running: it waits for pods whose end nothing says.\n")
	case NeverFits:
		fmt.Fprintf(&b, "The job never fits: not even on the cluster with no pod running, where %d of its %d pods are placed.\n", a.PlacedOnEmpty, len(a.Pods))
		for _, r := range a.Never {
			fmt.Fprintf(&b, "  - %s\n", r)
		}
	}
	a.Queue.writeText(&b)
	if a.Verdict != NeverFits && len(a.Waiting) > 0 {
		b.WriteString("Why it waits now:\n")
		for _, r := range a.Waiting {
			fmt.Fprintf(&b, "  - %s\n", r)
		}
	}
	for _, d := range a.Domains {
		fmt.Fprintf(&b, "Pod group %s: %s", d.Group, d.Words)
		if d.Domain != "" {
			fmt.Fprintf(&b, " (%s)", d.Domain)
		}
		b.WriteString(".\n")
	}
	if placed := a.placed(); len(placed) > 0 {
		b.WriteString("Placement:\n")
		for _, p := range placed {
			line := fmt.Sprintf("  - %s on %s", p.Pod, p.Node)
			if len(p.Cards) > 0 {
				line += fmt.Sprintf(", cards %s", strings.Trim(fmt.Sprint(p.Cards), "[]"))
				if len(p.UUIDs) > 0 {
					line += " (" + strings.Join(p.UUIDs, ", ") + ")"
				}
			}
			b.WriteString(line + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (a *Answer) placed() []Placement {
	var out []Placement
	for _, p := range a.Pods {
		if p.Node != "" {
			out = append(out, p)
		}
	}
	return out
}

// writeText says what the team queues say of the job; nothing without a
// queue.
func (q *QueueAnswer) writeText(b *strings.Builder) {
	switch {
	case q == nil:
		return
	case q.Problem != "":
		fmt.Fprintf(b, "Team queue: the job's pods name a queue that cannot hold them: %s\n", q.Problem)
		return
	}
	fmt.Fprintf(b, "Team queue: %s", q.Queue)
	if q.Guaranteed != "" {
		fmt.Fprintf(b, " (cards: %s guaranteed, %s in use, fair share with the job %s", q.Guaranteed, q.Used, q.FairShare)
		if q.Limit != "" {
			fmt.Fprintf(b, ", limit %s", q.Limit)
		}
		if len(q.BorrowsFrom) > 0 {
			fmt.Fprintf(b, ", borrowing from %s", strings.Join(q.BorrowsFrom, ", "))
		}
		b.WriteString(")")
	}
	fmt.Fprintf(b, ". The job asks %s cards: %s.\n", q.Job, q.Standing)
}
