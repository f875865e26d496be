package whatif

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/scheduler"
)

// teamSnapshot is the one-node snapshot with two namespaces, team-vision
// and team-sandbox, labelled with their queues, and the queues.
func teamSnapshot(t *testing.T, now time.Time, queues []*aischedv1alpha1.Queue, running ...*corev1.Pod) *Snapshot {
	t.Helper()
	s := snapshot(t, now, running...)
	for _, team := range []string{"vision", "sandbox"} {
		s.Core = append(s.Core, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-" + team,
			Labels: map[string]string{aischedv1alpha1.QueueLabel: team}}})
	}
	for _, q := range queues {
		s.Aisched = append(s.Aisched, q)
	}
	return s
}

// cardQueue is a queue of cards: guaranteed, and a limit when not "".
func cardQueue(name, guaranteed, limit string) *aischedv1alpha1.Queue {
	r := aischedv1alpha1.QueueResource{Name: aischedv1alpha1.QueueGPU, Guaranteed: ptr.To(resource.MustParse(guaranteed))}
	if limit != "" {
		r.Limit = ptr.To(resource.MustParse(limit))
	}
	return &aischedv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: aischedv1alpha1.QueueSpec{Resources: []aischedv1alpha1.QueueResource{r}}}
}

// teamPod is gpuPod in namespace team-<team>.
func teamPod(team, name, card string, started time.Time, cards string) *corev1.Pod {
	p := gpuPod(name, card, started, "")
	p.Namespace, p.UID = "team-"+team, types.UID(fmt.Sprintf("uid-%s-%s", team, name))
	q := resource.MustParse(cards)
	p.Spec.Containers[0].Resources.Requests[gpu.ResourceName] = q
	p.Spec.Containers[0].Resources.Limits[gpu.ResourceName] = q
	return p
}

// Vision, guaranteed both cards and idle, asks for them while sandbox,
// guaranteed none, borrows them: the answer names vision's queue, says
// the job is within its guarantee, and that it takes both cards back from
// sandbox.
func TestRunQueueReclaim(t *testing.T) {
	cfg, err := scheduler.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	queues := []*aischedv1alpha1.Queue{cardQueue("vision", "2", ""), cardQueue("sandbox", "0", "")}
	snap := teamSnapshot(t, now, queues,
		teamPod("sandbox", "s-0", "0", now.Add(-time.Hour), "1"), teamPod("sandbox", "s-1", "1", now.Add(-time.Hour), "1"))
	ans, err := Run(context.Background(), snap, &Job{Pods: []*corev1.Pod{teamPod("vision", "train", "", now, "2")}}, Options{SchedulerConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Verdict != FitsAfterPreemption {
		t.Fatalf("verdict %s (%+v), want FitsAfterPreemption", ans.Verdict, ans)
	}
	q := ans.Queue
	if q == nil {
		t.Fatal("no queue in the answer")
	}
	if q.Queue != "aischedqueue vision" || q.Guaranteed != "2" || q.Used != "0" || q.Job != "2" || !strings.HasPrefix(q.Standing, "within the guarantee") {
		t.Errorf("queue %+v, want vision, 2 guaranteed, 0 used, the job's 2 within the guarantee", q)
	}
	if want := "aischedqueue sandbox: team-sandbox/s-0, team-sandbox/s-1"; len(q.TakenBack) != 1 || q.TakenBack[0] != want {
		t.Errorf("taken back %v, want [%s]", q.TakenBack, want)
	}
	var text strings.Builder
	if err := ans.WriteText(&text, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"by taking back 2 running pods that other queues borrowed", "Team queue: aischedqueue vision (cards: 2 guaranteed, 0 in use"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("answer %q, want it to say %q", text.String(), want)
		}
	}
}

// A job that would take its queue past its limit never fits, and says so
// with the queue, the resource and the amounts.
func TestRunQueueLimit(t *testing.T) {
	cfg, err := scheduler.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	snap := teamSnapshot(t, now, []*aischedv1alpha1.Queue{cardQueue("vision", "0", "1")})
	ans, err := Run(context.Background(), snap, &Job{Pods: []*corev1.Pod{teamPod("vision", "big", "", now, "2")}}, Options{SchedulerConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Verdict != NeverFits {
		t.Fatalf("verdict %s (%+v), want NeverFits", ans.Verdict, ans)
	}
	if q := ans.Queue; q == nil || q.Limit != "1" || !strings.HasPrefix(q.Standing, "past a limit: aischedqueue vision limits nvidia.com/gpu to 1") {
		t.Errorf("queue %+v, want vision's limit of 1 named", q)
	}
	if reasons := strings.Join(ans.Never, "\n"); !strings.Contains(reasons, "OverQueueLimit") || !strings.Contains(reasons, "aischedqueue vision limits nvidia.com/gpu to 1") {
		t.Errorf("reasons %q, want OverQueueLimit naming the queue's limit", reasons)
	}
}

// A pod that names a queue that does not exist is told so, with the key.
func TestRunQueueMissing(t *testing.T) {
	cfg, err := scheduler.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	snap := teamSnapshot(t, now, []*aischedv1alpha1.Queue{cardQueue("vision", "2", "")})
	job := teamPod("vision", "lost", "", now, "1")
	job.Labels = map[string]string{aischedv1alpha1.QueueLabel: "nope"}
	ans, err := Run(context.Background(), snap, &Job{Pods: []*corev1.Pod{job}}, Options{SchedulerConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if q := ans.Queue; q == nil || q.Problem != `label scheduling.aisched.io/queue="nope": there is no aischedqueue "nope"` {
		t.Errorf("queue %+v, want the missing queue named with its key", q)
	}
}
