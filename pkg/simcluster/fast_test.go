package simcluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/scheduler"
)

func startTestCluster(t *testing.T) Cluster {
	t.Helper()
	return startTestClusterWith(t, Options{MetricsInterval: -1})
}

// startTestClusterWith starts the test cluster with opts, its node pools
// and scheduler configuration set.
func startTestClusterWith(t *testing.T, opts Options) Cluster {
	t.Helper()
	cfg, err := scheduler.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := clusterfile.Parse("test", []byte(`apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: gpu, count: 1, cpu: "16", memory: 64Gi, gpus: {count: 2, model: Tesla-T4, memoryMiB: 15360}}
  - {name: cpu, count: 1, cpu: "16", memory: 64Gi}
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts.NodePools, opts.SchedulerConfig = cluster.NodePools, cfg
	c, err := Fast.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func testPod(name, profile string, gpus string, run time.Duration) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{nodesim.RunDurationAnnotation: run.String()}},
		Spec: corev1.PodSpec{SchedulerName: profile, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "c", Image: "sim", Resources: corev1.ResourceRequirements{Requests: req, Limits: corev1.ResourceList{}}}}},
	}
	if gpus != "" {
		p.Spec.Containers[0].Resources.Requests[gpu.ResourceName] = resource.MustParse(gpus)
		p.Spec.Containers[0].Resources.Limits[gpu.ResourceName] = resource.MustParse(gpus)
	}
	return p
}

// A pod is scheduled by the real scheduler, run by the simulated kubelet
// and ended after its run duration, all in virtual time.
func TestFastRunsPods(t *testing.T) {
	c := startTestCluster(t)
	ctx := context.Background()
	start := c.Now()
	began := time.Now()
	for _, p := range []*corev1.Pod{testPod("a", "aisched", "2", 10*time.Minute), testPod("b", "aisched", "1", time.Minute)} {
		if _, err := c.Client().CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.RunUntil(ctx, start.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	get := func(name string) *corev1.Pod {
		t.Helper()
		p, err := c.Client().CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if a := get("a"); a.Spec.NodeName != "gpu-0" || a.Status.Phase != corev1.PodRunning || a.Annotations[gpu.AssignedAnnotation] != "0,1" {
		t.Errorf("pod a: node %q phase %s cards %q, want gpu-0 Running 0,1", a.Spec.NodeName, a.Status.Phase, a.Annotations[gpu.AssignedAnnotation])
	}
	if b := get("b"); b.Spec.NodeName != "" {
		t.Errorf("pod b bound to %s, want pending: both cards are held", b.Spec.NodeName)
	}
	// Ten minutes of virtual time: a ends, b runs its minute and ends.
	if err := c.RunUntil(ctx, start.Add(12*time.Minute)); err != nil {
		t.Fatal(err)
	}
	a, b := get("a"), get("b")
	if a.Status.Phase != corev1.PodSucceeded || b.Status.Phase != corev1.PodSucceeded || b.Spec.NodeName != "gpu-0" {
		t.Errorf("after 12m: a %s, b %s on %q; want both Succeeded, b on gpu-0", a.Status.Phase, b.Status.Phase, b.Spec.NodeName)
	}
	if end := b.Status.ContainerStatuses; len(end) == 0 || end[0].State.Terminated == nil ||
		end[0].State.Terminated.FinishedAt.Sub(start.Add(10*time.Minute)) > 2*time.Minute {
		t.Errorf("pod b ended %v, want about 11m after the start (a ran 10m, b 1m)", end)
	}
	if !c.Now().Equal(start.Add(12 * time.Minute)) {
		t.Errorf("virtual time %v, want start + 12m", c.Now().Sub(start))
	}
	t.Logf("12 virtual minutes in %v", time.Since(began))
}
