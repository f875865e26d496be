package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/podgroup"
)

func pendingPod(name, group string, created time.Time, reason, message string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{}},
		Spec:   corev1.PodSpec{SchedulerName: "aisched"},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if group != "" {
		p.Labels[podgroup.NameLabel] = group
	}
	if reason != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: message}}
	}
	return p
}

func group(name string, minMember, scheduled, position int32, reason, message string) schedulingv1alpha1.PodGroup {
	g := schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: minMember}}
	g.Status.Scheduled, g.Status.QueuePosition = scheduled, position
	if reason != "" {
		g.Status.Conditions = []metav1.Condition{{Type: schedulingv1alpha1.ConditionAdmitted, Status: metav1.ConditionFalse, Reason: reason, Message: message}}
	}
	return g
}

func TestBuildWaitingWork(t *testing.T) {
	now := time.Now()
	pods := []corev1.Pod{
		pendingPod("big-1", "big", now.Add(-time.Minute), "WaitingForCapacity", "needs 16 cards, 6 free"),
		pendingPod("solo", "", now.Add(-2*time.Minute), "Unschedulable", "0/3 nodes are available"),
		pendingPod("small-1", "small", now, "", ""),
	}
	// solo shares two cards (KAI's form).
	pods[1].Annotations = map[string]string{gpu.KAIFractionAnnotation: "0.3", gpu.KAINumDevicesAnnotation: "2"}
	bound := pendingPod("bound", "", now, "", "")
	bound.Spec.NodeName = "n1"
	pods = append(pods, bound)
	groups := []schedulingv1alpha1.PodGroup{
		group("small", 1, 0, 2, "BehindReservation", "behind ml/big"),
		group("big", 4, 0, 1, "WaitingForCapacity", "needs 16 cards, 6 free"),
		group("done", 2, 2, 0, "", ""),
	}
	quota := corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "gpus"}}
	quota.Status.Hard = corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("8")}
	quota.Status.Used = corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("6")}

	w := BuildWaitingWork(pods, groups, []corev1.ResourceQuota{quota})
	if len(w.Pods) != 3 || w.Pods[0].Name != "solo" || w.Pods[1].Name != "big-1" || w.Pods[1].Group != "ml/big" {
		t.Fatalf("pods %+v: want solo, big-1, small-1, oldest first, without the bound pod", w.Pods)
	}
	if w.Pods[0].Reason != "Unschedulable" || w.Pods[1].Message != "needs 16 cards, 6 free" {
		t.Errorf("pods' reasons %+v", w.Pods[:2])
	}
	if w.Pods[0].GPU != "300/1000 of each of 2 GPUs" || w.Pods[1].GPU != "" {
		t.Errorf("pods' GPUs %q, %q; want solo's share of two cards, none for big-1", w.Pods[0].GPU, w.Pods[1].GPU)
	}
	if len(w.Groups) != 2 || w.Groups[0].Name != "big" || w.Groups[1].Name != "small" {
		t.Fatalf("groups %+v: want big then small, by queue position, and not the scheduled group", w.Groups)
	}
	if g := w.Groups[0]; g.Reason != "WaitingForCapacity" || g.Pending != 1 || g.MinMember != 4 || len(g.Ahead) != 0 {
		t.Errorf("big: %+v", g)
	}
	if g := w.Groups[1]; len(g.Ahead) != 1 || g.Ahead[0] != "ml/big" {
		t.Errorf("small: ahead %v, want [ml/big]", g.Ahead)
	}
	if len(w.Quotas) != 1 || w.Quotas[0].Resources[0].Percent != 75 || w.Quotas[0].Resources[0].Used != "6" {
		t.Errorf("quotas %+v: want 6 of 8 GPUs used, 75%%", w.Quotas)
	}
}

// teamQueue is an aischedqueue with its GPU status.
func teamQueue(name, parent string, guaranteed, used, borrowed int64, borrowsFrom ...string) *aischedv1alpha1.Queue {
	q := &aischedv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: aischedv1alpha1.QueueSpec{Parent: parent}}
	q.Status.GPU = &aischedv1alpha1.QueueResourceStatus{Name: aischedv1alpha1.QueueGPU, Guaranteed: *resource.NewQuantity(guaranteed, resource.DecimalSI),
		Used: *resource.NewQuantity(used, resource.DecimalSI), Borrowed: *resource.NewQuantity(borrowed, resource.DecimalSI)}
	q.Status.BorrowsFrom = borrowsFrom
	return q
}

// The waiting-work page shows the team queues as their tree, with the
// guarantee against the use and whom a queue borrows from; a user who may
// not list them is told why.
func TestWaitingWorkTeamQueues(t *testing.T) {
	cycle := teamQueue("loop", "loop", 0, 0, 0)
	cycle.Status.Conditions = []metav1.Condition{{Type: aischedv1alpha1.ConditionQueueValid, Status: metav1.ConditionFalse, Message: "a cycle of parents: loop -> loop"}}
	ts := newTestServer(t)
	for _, q := range []*aischedv1alpha1.Queue{teamQueue("sandbox", "", 0, 6, 6, "vision: 6"), teamQueue("vision", "research", 8, 2, 0),
		teamQueue("research", "", 16, 6, 0), teamQueue("nlp", "research", 8, 4, 0), cycle} {
		if _, err := ts.aisched.AischedV1alpha1().AischedQueues().Create(context.Background(), q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w := ts.do(t, "GET", "/api/queue", nil, ts.signIn(t, "admin-token"), nil)
	var got WaitingWork
	if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/queue: %d %s", w.Code, w.Body)
	}
	var order []string
	for _, q := range got.TeamQueues {
		order = append(order, fmt.Sprintf("%s@%d", q.Name, q.Depth))
	}
	if want := "[research@0 nlp@1 vision@1 sandbox@0 loop@0]"; fmt.Sprint(order) != want {
		t.Errorf("queues %v, want the tree %s", order, want)
	}
	byName := map[string]TeamQueue{}
	for _, q := range got.TeamQueues {
		byName[q.Name] = q
	}
	if q := byName["sandbox"]; q.Used != "6" || q.Borrowed != "6" || fmt.Sprint(q.BorrowsFrom) != "[vision: 6]" {
		t.Errorf("sandbox %+v: want 6 used, all borrowed from vision", q)
	}
	if q := byName["nlp"]; q.Percent != 50 || q.Guaranteed != "8" {
		t.Errorf("nlp %+v: want 4 of 8 guaranteed used, 50%%", q)
	}
	if q := byName["loop"]; !strings.Contains(q.Invalid, "cycle") {
		t.Errorf("loop %+v: want its Valid=False message", q)
	}

	// A user who may list pods but not cluster-scoped queues.
	ts.aisched.PrependReactor("list", "aischedqueues", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: aischedv1alpha1.GroupName, Resource: "aischedqueues"}, "", nil)
	})
	w = ts.do(t, "GET", "/api/queue", nil, ts.signIn(t, "admin-token"), nil)
	if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusOK || err != nil || !strings.Contains(got.TeamQueuesRefused, "forbidden") {
		t.Errorf("queues forbidden: %d %s, want the page with the refusal", w.Code, w.Body)
	}
}
