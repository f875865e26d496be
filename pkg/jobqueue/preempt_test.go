package jobqueue

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/podgroup"
)

// bindOn binds pod to room r as GPUFit would: its cards taken from the
// room's and recorded on it, its resources taken from the room's free.
func bindOn(t testing.TB, r *Room, p *corev1.Pod, prio int32) *corev1.Pod {
	t.Helper()
	p.Spec.NodeName = r.Node.Name
	p.Spec.Priority = ptr.To(prio)
	req, err := gpu.ParseRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	cards, ok := r.GPUs.Take(req)
	if !ok {
		t.Fatalf("pod %s does not fit %s", p.Name, r.Node.Name)
	}
	if len(cards) > 0 {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[gpu.AssignedAnnotation] = strings.Trim(strings.Join(strings.Fields(fmt.Sprint(cards)), ","), "[]")
	}
	r.Free = r.Free.Sub(RequestOf(p))
	r.Pods = append(r.Pods, p)
	return p
}

func member(p *corev1.Pod, group string) *corev1.Pod {
	p.Labels = map[string]string{podgroup.NameLabel: group, podgroup.MinAvailableLabel: "2"}
	return p
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func TestPreemption(t *testing.T) {
	// Two nodes of 4 cards. high needs 2 pods of 4 cards: both nodes whole.
	high := group("high", 2, 1, 4, 0, 10)
	tests := []struct {
		name    string
		bind    func(t *testing.T, a, b *Room)
		g       Group
		want    Reason
		victims []string
	}{{
		// A gang of 4 x 2 cards spread over both nodes goes whole.
		name: "a victim gang spread over two nodes",
		bind: func(t *testing.T, a, b *Room) {
			for i, r := range []*Room{a, a, b, b} {
				bindOn(t, r, member(pod(fmt.Sprintf("low-%d", i), 1, 2), "low"), 0)
			}
		},
		g: high, want: ReasonPreempting, victims: []string{"low-0", "low-1", "low-2", "low-3"},
	}, {
		// Only node b is needed for a one-pod group; the gang on a stays.
		name: "the fewest, lowest-priority pods",
		bind: func(t *testing.T, a, b *Room) {
			bindOn(t, a, member(pod("gang-0", 1, 2), "gang"), 0)
			bindOn(t, a, member(pod("gang-1", 1, 2), "gang"), 0)
			bindOn(t, b, pod("solo", 1, 4), 0)
		},
		g: group("one", 1, 1, 4, 0, 10), want: ReasonPreempting, victims: []string{"solo"},
	}, {
		// A gang with a member of higher priority is not preempted.
		name: "no victim of higher priority",
		bind: func(t *testing.T, a, b *Room) {
			bindOn(t, a, member(pod("top-0", 1, 4), "top"), 20)
			bindOn(t, b, member(pod("top-1", 1, 4), "top"), 0)
		},
		g: high, want: ReasonWaitingForCapacity,
	}, {
		name: "preemptionPolicy Never",
		bind: func(t *testing.T, a, b *Room) {
			bindOn(t, a, pod("x", 1, 4), 0)
			bindOn(t, b, pod("y", 1, 4), 0)
		},
		g: func() Group {
			g := group("polite", 2, 1, 4, 0, 10)
			for _, p := range g.Pending {
				p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
			}
			return g
		}(),
		want: ReasonWaitingForCapacity,
	}, {
		// Pods being deleted free their room without new victims.
		name: "pods already ending",
		bind: func(t *testing.T, a, b *Room) {
			for _, r := range []*Room{a, b} {
				p := bindOn(t, r, pod("ending-"+r.Node.Name, 1, 4), 0)
				p.DeletionTimestamp = &metav1.Time{Time: t0}
			}
		},
		g: high, want: ReasonPreempting,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := room("a", 8, 4, 8, 4), room("b", 8, 4, 8, 4)
			tc.bind(t, &a, &b)
			plan := Compute(Input{Groups: []Group{tc.g}, Rooms: []Room{a, b}})
			d := plan.Decisions[tc.g.Key]
			if d.Reason != tc.want {
				t.Fatalf("%s (%s), want %s", d.Reason, d.Message, tc.want)
			}
			var got []string
			for _, p := range plan.Preemptions {
				if p.Group != tc.g.Key || p.Priority != tc.g.Priority {
					t.Errorf("preemption for %s at %d, want %s at %d", p.Group, p.Priority, tc.g.Key, tc.g.Priority)
				}
				got = append(got, names(p.Victims)...)
			}
			if !slices.Equal(got, tc.victims) {
				t.Errorf("victims %v, want %v", got, tc.victims)
			}
			if tc.want == ReasonPreempting && (plan.Reservation == nil || plan.Reservation.Holder != tc.g.Key) {
				t.Errorf("reservation %+v, want one for %s while its victims leave", plan.Reservation, tc.g.Key)
			}
		})
	}
}
