package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/whatif"
)

// TestWhatif asks whatif about four jobs on aisched up, reading the
// cluster as a service account that may only get, list and watch (any
// write would be refused), and then creates each job for real to compare
// with what the scheduler does: a job that fits now; one that fits once
// running pods end; one that fits by preempting pods of lower priority;
// one that never fits.
func TestWhatif(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "  - {name: gpu, count: 2, cpu: \"16\", memory: 64Gi, gpus: {count: 2, model: Tesla-T4, memoryMiB: 15360}}\n")
	ctx := context.Background()
	readOnly := readOnlyClients(t, c)
	cfg, err := scheduler.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	createPriorityClasses(t, c, map[string]int32{"low": -10, "high": 1000})
	ask := func(job *corev1.Pod) *whatif.Answer {
		t.Helper()
		snap, err := whatif.Take(ctx, readOnly.core, readOnly.aisched)
		if err != nil {
			t.Fatalf("snapshot with read-only rights: %v", err)
		}
		ans, err := whatif.Run(ctx, snap, &whatif.Job{Pods: []*corev1.Pod{job}}, whatif.Options{SchedulerConfig: cfg})
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		_ = ans.WriteText(&text, snap.Taken)
		t.Logf("whatif %s:\n%s", job.Name, text.String())
		return ans
	}
	create := func(p *corev1.Pod) {
		t.Helper()
		if _, err := c.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	boundTo := func(name string) string {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return p.Spec.NodeName
	}
	waitBound := func(name string, within time.Duration) {
		t.Helper()
		localtest.Eventually(t, within, "pod "+name+" bound", func(context.Context) (bool, error) { return boundTo(name) != "", nil })
	}

	// 1. Fits now: 4 free cards.
	ans := ask(gpuJob("one", "1", "", ""))
	if ans.Verdict != whatif.FitsNow || len(ans.Pods) != 1 || ans.Pods[0].Node == "" || len(ans.Pods[0].Cards) != 1 {
		t.Fatalf("one: %+v, want FitsNow on a node and a card", ans)
	}
	create(gpuJob("one", "1", "", ""))
	waitBound("one", 30*time.Second)

	// 2. Fits once running pods end: three pods of 30s take the other
	// three cards.
	for _, n := range []string{"blocker-0", "blocker-1", "blocker-2"} {
		create(gpuJob(n, "1", "", "30s"))
	}
	for _, n := range []string{"blocker-0", "blocker-1", "blocker-2"} {
		waitBound(n, 30*time.Second)
		localtest.Eventually(t, 30*time.Second, n+" running", func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			return err == nil && p.Status.StartTime != nil, err
		})
	}
	ans = ask(gpuJob("later", "1", "", ""))
	if ans.Verdict != whatif.FitsLater || ans.At == nil || len(ans.After) == 0 || !strings.HasPrefix(ans.After[0], "default/blocker-") {
		t.Fatalf("later: %+v, want FitsLater after a blocker ends", ans)
	}
	create(gpuJob("later", "1", "", ""))
	time.Sleep(2 * time.Second)
	if n := boundTo("later"); n != "" {
		t.Fatalf("later bound to %s at once; whatif said it waits until %s", n, ans.At)
	}
	waitBound("later", time.Until(ans.At.Add(30*time.Second)))
	if late := time.Since(*ans.At); late < -5*time.Second {
		t.Errorf("later bound %s before whatif's time", -late)
	}

	// 3. Fits by preemption: the last two cards go to pods of low
	// priority once the blockers ended; a pod of high priority takes a
	// card of one of them.
	localtest.Eventually(t, time.Minute, "the blockers ended", func(ctx context.Context) (bool, error) {
		for _, n := range []string{"blocker-0", "blocker-1", "blocker-2"} {
			p, err := c.Client.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			if err == nil && p.Status.Phase != corev1.PodSucceeded {
				return false, nil
			}
		}
		return true, nil
	})
	for _, n := range []string{"low-0", "low-1"} {
		create(gpuJob(n, "1", "low", ""))
		waitBound(n, 30*time.Second)
	}
	ans = ask(gpuJob("urgent", "1", "high", ""))
	if ans.Verdict != whatif.FitsAfterPreemption || len(ans.Preempted) != 1 || !strings.HasPrefix(ans.Preempted[0], "default/low-") {
		t.Fatalf("urgent: %+v, want FitsAfterPreemption of one low pod", ans)
	}
	create(gpuJob("urgent", "1", "high", ""))
	waitBound("urgent", 30*time.Second)
	localtest.Eventually(t, 30*time.Second, "a low pod preempted", func(ctx context.Context) (bool, error) {
		for _, n := range []string{"low-0", "low-1"} {
			p, err := c.Client.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || err == nil && p.DeletionTimestamp != nil {
				return true, nil
			}
		}
		return false, nil
	})

	// 4. Never fits: five cards on nodes of two.
	ans = ask(gpuJob("huge", "5", "", ""))
	if ans.Verdict != whatif.NeverFits || len(ans.Never) == 0 || !slices.ContainsFunc(ans.Never, func(s string) bool { return strings.Contains(s, "GPU") }) {
		t.Fatalf("huge: %+v, want NeverFits with a reason about GPUs", ans)
	}
	create(gpuJob("huge", "5", "", ""))
	localtest.Eventually(t, 30*time.Second, "huge reported unschedulable", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "huge", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
				return p.Spec.NodeName == "", nil
			}
		}
		return false, nil
	})

	// The read-only identity can write nothing.
	if _, err := readOnly.core.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a write with whatif's identity: %v, want Forbidden", err)
	}
}

// gpuJob is a pod of the aisched profile asking for gpus cards, of the
// priority class given, running for run (until deleted when "").
func gpuJob(name, gpus, priorityClass, run string) *corev1.Pod {
	q := resource.MustParse(gpus)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			SchedulerName: scheduler.AischedProfile, PriorityClassName: priorityClass,
			Containers: []corev1.Container{{Name: "c", Image: "sim", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), gpu.ResourceName: q},
				Limits:   corev1.ResourceList{gpu.ResourceName: q},
			}}},
		},
	}
	if run != "" {
		p.Annotations[nodesim.RunDurationAnnotation] = run
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	return p
}

type clients struct {
	core    kubernetes.Interface
	aisched versioned.Interface
}

// readOnlyClients are clients of a service account bound to a ClusterRole
// that may get, list and watch every resource, and nothing else.
func readOnlyClients(t *testing.T, c *local.Cluster) clients {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "whatif"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "read-everything"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "whatif-reads"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "whatif"}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", serviceAccountKubeconfig(t, c, "default", "whatif"))
	if err != nil {
		t.Fatal(err)
	}
	return clients{core: kubernetes.NewForConfigOrDie(cfg), aisched: versioned.NewForConfigOrDie(cfg)}
}
