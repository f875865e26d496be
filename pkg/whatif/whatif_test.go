package whatif

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/scheduler"
)

// snapshot is a cluster of one node of two T4 cards, and running pods.
func snapshot(t *testing.T, now time.Time, running ...*corev1.Pod) *Snapshot {
	t.Helper()
	c, err := clusterfile.Parse("test", []byte("apiVersion: aisched.io/v1alpha1\nkind: Cluster\nnodePools:\n  - {name: gpu, count: 1, cpu: \"16\", memory: 64Gi, gpus: {count: 2, model: Tesla-T4, memoryMiB: 15360}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Snapshot{Taken: now}
	for _, n := range nodesim.Nodes(c) {
		node := n.Object.DeepCopy()
		node.Status.Allocatable = node.Status.Capacity
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		s.Core = append(s.Core, node)
		s.Aisched = append(s.Aisched, n.Inventory)
	}
	for _, p := range running {
		s.Core = append(s.Core, p)
		s.Pods = append(s.Pods, p)
	}
	return s
}

func gpuPod(name, card string, started time.Time, run string) *corev1.Pod {
	q := resource.MustParse("1")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Annotations: map[string]string{}},
		Spec: corev1.PodSpec{SchedulerName: "aisched", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{gpu.ResourceName: q}, Limits: corev1.ResourceList{gpu.ResourceName: q}}}}},
	}
	if card != "" {
		p.Spec.NodeName = "gpu-0"
		p.Annotations[gpu.AssignedAnnotation] = card
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: started}}
	}
	if run != "" {
		p.Annotations[nodesim.RunDurationAnnotation] = run
	}
	return p
}

func TestRunFitsLater(t *testing.T) {
	cfg, err := scheduler.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	snap := snapshot(t, now, gpuPod("blocker-0", "0", now.Add(-10*time.Second), "30s"), gpuPod("forever-1", "1", now.Add(-time.Hour), ""))
	ans, err := Run(context.Background(), snap, &Job{Pods: []*corev1.Pod{gpuPod("job-0", "", now, "")}}, Options{SchedulerConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Verdict != FitsLater || ans.At == nil || !ans.At.Equal(now.Add(20*time.Second)) || len(ans.After) != 1 || ans.After[0] != "default/blocker-0" {
		t.Fatalf("%+v, want FitsLater at +20s after default/blocker-0", ans)
	}
	if p := ans.Pods[0]; p.Node != "gpu-0" || len(p.Cards) != 1 || p.Cards[0] != 0 {
		t.Errorf("placement %+v, want card 0 of gpu-0", p)
	}
}

func TestRunVerdicts(t *testing.T) {
	cfg, err := scheduler.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	low := gpuPod("low-1", "1", now.Add(-time.Hour), "")
	low.Spec.Priority = new(int32)
	*low.Spec.Priority = -10
	urgent := gpuPod("urgent-0", "", now, "")
	urgent.Spec.Priority = new(int32)
	*urgent.Spec.Priority = 1000
	huge := gpuPod("huge-0", "", now, "")
	huge.Spec.Containers[0].Resources.Requests[gpu.ResourceName] = resource.MustParse("3")
	huge.Spec.Containers[0].Resources.Limits[gpu.ResourceName] = resource.MustParse("3")
	for _, tc := range []struct {
		name    string
		running []*corev1.Pod
		job     *corev1.Pod
		want    string
	}{
		{"a free card", []*corev1.Pod{gpuPod("forever-1", "1", now.Add(-time.Hour), "")}, gpuPod("job-0", "", now, ""), FitsNow},
		{"a card of a pod of lower priority", []*corev1.Pod{gpuPod("forever-0", "0", now.Add(-time.Hour), ""), low}, urgent, FitsAfterPreemption},
		{"more cards than a node has", nil, huge, NeverFits},
		{"cards held by pods whose end is unknown", []*corev1.Pod{gpuPod("forever-0", "0", now.Add(-time.Hour), ""), gpuPod("forever-1", "1", now.Add(-time.Hour), "")}, gpuPod("job-0", "", now, ""), NotWithinHorizon},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ans, err := Run(context.Background(), snapshot(t, now, tc.running...), &Job{Pods: []*corev1.Pod{tc.job}}, Options{SchedulerConfig: cfg})
			if err != nil {
				t.Fatal(err)
			}
			if ans.Verdict != tc.want {
				t.Fatalf("%+v, want %s", ans, tc.want)
			}
			if tc.want == FitsAfterPreemption && (len(ans.Preempted) != 1 || ans.Preempted[0] != "default/low-1") {
				t.Errorf("preempted %v, want [default/low-1]", ans.Preempted)
			}
			if tc.want == NeverFits && len(ans.Never) == 0 {
				t.Error("no reason given for NeverFits")
			}
		})
	}
}

// TestRunSubmitted asks about jobs the cluster has already: they are read
// as themselves (no "already exists"), with what the cluster says of them.
func TestRunSubmitted(t *testing.T) {
	cfg, err := scheduler.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// A Deployment's pod, bound to card 0 by the cluster.
	web := gpuPod("web-5d8f-x2k", "0", now.Add(-time.Minute), "")
	web.Labels = map[string]string{"app": "web", "pod-template-hash": "5d8f"}
	web.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d8f", Controller: ptr.To(true)}}
	// A pod of three cards on a node of two, pending with the
	// scheduler's reason.
	huge := gpuPod("huge", "", now, "")
	huge.Spec.Containers[0].Resources.Limits[gpu.ResourceName] = resource.MustParse("3")
	huge.Spec.Containers[0].Resources.Requests[gpu.ResourceName] = resource.MustParse("3")
	huge.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}
	for _, tc := range []struct {
		name          string
		manifest      string
		wantVerdict   string
		wantSubmitted *Submitted
		wantPods      []string
	}{
		{
			name: "a Deployment running",
			manifest: `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {schedulerName: aisched, containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: "1"}}}]}
`,
			// One of its two pods is the cluster's; the other is made and
			// takes the other card.
			wantVerdict:   FitsNow,
			wantSubmitted: &Submitted{Pods: 1, Bound: 1},
			wantPods:      []string{"default/web-5d8f-x2k", "default/web-1"},
		},
		{
			name: "a pod that never fits",
			manifest: `apiVersion: v1
kind: Pod
metadata: {name: huge}
spec: {schedulerName: aisched, containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: "3"}}}]}
`,
			wantVerdict:   NeverFits,
			wantSubmitted: &Submitted{Pods: 1, Says: []string{"pod default/huge: Unschedulable: 0/1 nodes are available"}},
			wantPods:      []string{"default/huge"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, err := ParseJob("job.yaml", []byte(tc.manifest), "default")
			if err != nil {
				t.Fatal(err)
			}
			ans, err := Run(context.Background(), snapshot(t, now, web, huge), job, Options{SchedulerConfig: cfg})
			if err != nil {
				t.Fatal(err)
			}
			var pods []string
			for _, p := range ans.Pods {
				pods = append(pods, p.Pod)
			}
			if ans.Verdict != tc.wantVerdict {
				t.Errorf("verdict %s, want %s (%+v)", ans.Verdict, tc.wantVerdict, ans)
			}
			if diff := cmp.Diff(tc.wantSubmitted, ans.Submitted); diff != "" {
				t.Errorf("submitted (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPods, pods); diff != "" {
				t.Errorf("pods (-want,+got):\n%s", diff)
			}
		})
	}
}

// A job that asks for one rack is answered with the rack: two racks of two
// nodes of two cards, r1 with a card held, so the gang of two 2-card pods
// fits r2 only; asked for one node's worth more than a rack has, it never
// fits and says which rack holds the most.
func TestRunTopology(t *testing.T) {
	cfg, err := scheduler.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	c, err := clusterfile.Parse("test", []byte(`apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: r1, count: 2, cpu: "16", memory: 64Gi, labels: {example.com/rack: r1}, gpus: {count: 2, model: Tesla-T4, memoryMiB: 15360}}
  - {name: r2, count: 2, cpu: "16", memory: 64Gi, labels: {example.com/rack: r2}, gpus: {count: 2, model: Tesla-T4, memoryMiB: 15360}}
`))
	if err != nil {
		t.Fatal(err)
	}
	snap := &Snapshot{Taken: now}
	for _, n := range nodesim.Nodes(c) {
		node := n.Object.DeepCopy()
		node.Status.Allocatable = node.Status.Capacity
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		snap.Core = append(snap.Core, node)
		snap.Aisched = append(snap.Aisched, n.Inventory)
	}
	snap.Aisched = append(snap.Aisched, &aischedv1alpha1.Topology{ObjectMeta: metav1.ObjectMeta{Name: "racks"},
		Spec: aischedv1alpha1.TopologySpec{Levels: []aischedv1alpha1.TopologyLevel{{NodeLabel: "example.com/rack"}}}})
	held := gpuPod("held", "0", now.Add(-time.Hour), "")
	held.Spec.NodeName = "r1-0"
	snap.Core, snap.Pods = append(snap.Core, held), append(snap.Pods, held)
	gang := func(n int) *Job {
		job := &Job{}
		for i := range n {
			p := gpuPod(fmt.Sprintf("train-%d", i), "", now, "")
			p.Spec.Containers[0].Resources.Requests[gpu.ResourceName] = resource.MustParse("2")
			p.Spec.Containers[0].Resources.Limits[gpu.ResourceName] = resource.MustParse("2")
			p.Labels = map[string]string{"pod-group.scheduling.sigs.k8s.io/name": "train", "pod-group.scheduling.sigs.k8s.io/min-available": fmt.Sprint(n)}
			p.Annotations[aischedv1alpha1.TopologyRequiredKey] = "example.com/rack"
			job.Pods = append(job.Pods, p)
		}
		return job
	}
	ans, err := Run(context.Background(), snap, gang(2), Options{SchedulerConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	want := []Domain{{Group: "default/train", Domain: "example.com/rack=r2", Words: "inside rack r2"}}
	if ans.Verdict != FitsNow || !cmp.Equal(want, ans.Domains) {
		t.Fatalf("%s, domains %+v, waiting %q, never %q; want FitsNow in %+v", ans.Verdict, ans.Domains, ans.Waiting, ans.Never, want)
	}
	var text strings.Builder
	if err := ans.WriteText(&text, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "Pod group default/train: inside rack r2 (example.com/rack=r2).") {
		t.Errorf("text does not name the rack:\n%s", text.String())
	}
	ans, err = Run(context.Background(), snap, gang(3), Options{SchedulerConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Verdict != NeverFits || len(ans.Never) == 0 || !strings.Contains(ans.Never[0], "no rack holds the 3 members it needs at once; the best, rack r1, holds 2") {
		t.Errorf("%s, never %q; want NeverFits naming the best rack", ans.Verdict, ans.Never)
	}
}
