package integration

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// TestWorkloads runs what users of a cluster do first: a Deployment bound
// by the aisched profile, a Job whose pods finish, a namespace deletion.
func TestWorkloads(t *testing.T) {
	t.Parallel()
	c := localtest.Start(t, local.Options{})
	ctx := context.Background()
	ns := createNamespace(t, c.Client)

	pod := utiltesting.MakePod("", "").SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "500m").Req(corev1.ResourceMemory, "256Mi").Obj()
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, utiltesting.MakeDeployment("web", ns, 3, pod), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeploymentAvailable(t, c.Client, ns, "web", 3)
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || net.ParseIP(p.Status.PodIP) == nil || p.Status.HostIP == "" {
			t.Errorf("pod %s: phase %s, pod IP %q, host IP %q; want Running with IPs", p.Name, p.Status.Phase, p.Status.PodIP, p.Status.HostIP)
		}
		// The Scheduled event names the profile that bound the pod.
		if got := scheduledBy(t, c, &p); got != scheduler.AischedProfile {
			t.Errorf("pod %s was bound by %q, want %q", p.Name, got, scheduler.AischedProfile)
		}
	}

	job := utiltesting.MakePod("", "").SchedulerName(scheduler.AischedProfile).RestartPolicy(corev1.RestartPolicyNever).
		Annotation(nodesim.RunDurationAnnotation, "2s").GPU(1).Obj()
	if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, utiltesting.MakeJob("train", ns, 2, job), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	localtest.Eventually(t, time.Minute, "job train completes", func(ctx context.Context) (bool, error) {
		j, err := c.Client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("job failed: %s", cond.Message)
			}
		}
		return j.Status.Succeeded == 2 && jobComplete(j), nil
	})

	if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	localtest.Eventually(t, 2*time.Minute, "namespace and its pods are gone", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) > 0 {
			return false, err
		}
		_, err = c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// TestKubeletAdmission binds a pod by hand to a node without room for it:
// the simulated kubelet rejects it like a real one, and a fitting pod runs.
func TestKubeletAdmission(t *testing.T) {
	t.Parallel()
	c := localtest.Start(t, local.Options{})
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	tooBig := utiltesting.MakePod("too-big", ns).Node("cpu-0").GPU(1).RestartPolicy(corev1.RestartPolicyNever).Obj()
	fits := utiltesting.MakePod("fits", ns).Node("gpu-t4-0").GPU(4).Obj()
	for _, p := range []*corev1.Pod{tooBig, fits} {
		p.UID = ""
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	localtest.Eventually(t, time.Minute, "too-big is rejected and fits runs", func(ctx context.Context) (bool, error) {
		big, err := c.Client.CoreV1().Pods(ns).Get(ctx, "too-big", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ok, err := c.Client.CoreV1().Pods(ns).Get(ctx, "fits", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return big.Status.Phase == corev1.PodFailed && big.Status.Reason == "OutOf"+string(gpu.ResourceName) &&
			ok.Status.Phase == corev1.PodRunning, nil
	})
}

// scheduledBy returns the reporting controller of the pod's Scheduled event.
func scheduledBy(t *testing.T, c *local.Cluster, pod *corev1.Pod) string {
	t.Helper()
	var by string
	localtest.Eventually(t, 30*time.Second, "Scheduled event of "+pod.Name, func(ctx context.Context) (bool, error) {
		events, err := c.Client.EventsV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("regarding.name", pod.Name).String(),
		})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == "Scheduled" {
				by = e.ReportingController
				return true, nil
			}
		}
		return false, nil
	})
	return by
}

func jobComplete(j *batchv1.Job) bool {
	for _, cond := range j.Status.Conditions {
		if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
