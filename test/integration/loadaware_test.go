package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/podload"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// loadAwareConfig has one profile that scores by LoadAware alone, so that
// what the tests see is that plugin's doing.
const loadAwareConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
  - schedulerName: loadaware
    plugins:
      preScore:
        enabled:
          - name: LoadAware
      score:
        disabled:
          - name: "*"
        enabled:
          - name: LoadAware
`

// writeSample publishes a NodeMetrics for a node as an agent would: the
// same load on every resource, sampled age ago, and equal performance.
func writeSample(t *testing.T, client versioned.Interface, node string, pct int32, age time.Duration) {
	t.Helper()
	ctx := context.Background()
	api := client.AischedV1alpha1().NodeMetrics()
	m, err := api.Create(ctx, &aischedv1alpha1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Status = aischedv1alpha1.NodeMetricsStatus{
		SampleTime:  metav1.NewTime(time.Now().Add(-age)),
		Window:      metav1.Duration{Duration: 10 * time.Second},
		Source:      aischedv1alpha1.MetricsSourceAgent,
		Utilization: aischedv1alpha1.Utilization{CPU: ptr.To(pct), Memory: ptr.To(pct), Network: ptr.To(pct), Disk: ptr.To(pct)},
		Performance: aischedv1alpha1.Performance{Cores: 32, MaxFrequencyMHz: 3000, Memory: ptr.To(resource.MustParse("128Gi")), NetworkMbps: 10000, DiskMBps: 1000},
	}
	if _, err := api.UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podsPerNode waits until want pods of the namespace are bound and counts them by node.
func podsPerNode(t *testing.T, c *local.Cluster, ns string, want int) map[string]int {
	t.Helper()
	var out map[string]int
	localtest.Eventually(t, time.Minute, fmt.Sprintf("%d pods of %s bound", want, ns), func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		out = map[string]int{}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				out[p.Spec.NodeName]++
				bound++
			}
		}
		return bound == want, nil
	})
	return out
}

// TestLoadAware runs LoadAware on samples the test writes (the simulated
// nodes publish none here).
//
// Burst: 50 pods created at once on 4 nodes, one idle, three at 30%. Each
// pod declares cpu=1, memory=4Gi, network=25M, disk=2: 0.25*(1/32 + 4/128 +
// 0.02 + 0.02) = 0.025625 of L. The samples do not change while the pods
// land, so only the pods bound since the sample keep the idle node from
// taking all 50: it should take about (0.9 + 50*0.025625)/4 / 0.025625 =
// 21, and every other node some.
//
// Stale: "stale-0" claims 0% in a 5-minute-old sample but runs pods that
// request 24 of its 32 CPUs and 96 of 128Gi; "stale-1" is fresh at 40%.
// Past the TTL the sample is ignored: stale-0 scores 100*(1-0.75) = 25 from
// requests, stale-1 60, and the pod lands on stale-1.
func TestLoadAware(t *testing.T) {
	t.Parallel()
	cluster, err := clusterfile.Parse(t.Name(), []byte(`apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: burst, count: 4, cpu: "32", memory: 128Gi}
  - {name: stale, count: 2, cpu: "32", memory: 128Gi}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := scheduler.DecodeConfig([]byte(loadAwareConfig))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Options{Cluster: cluster, SchedulerConfig: cfg, Nodes: nodesim.Options{MetricsInterval: -1}})
	client := versioned.NewForConfigOrDie(c.Config)
	pool := func(w *utiltesting.PodWrapper, name string) *corev1.Pod {
		p := w.SchedulerName("loadaware").Obj()
		p.Spec.NodeSelector = map[string]string{nodesim.NodePoolLabel: name}
		return p
	}

	t.Run("burst", func(t *testing.T) {
		writeSample(t, client, "burst-0", 0, 0)
		for i := 1; i < 4; i++ {
			writeSample(t, client, fmt.Sprintf("burst-%d", i), 30, 0)
		}
		ns := createNamespace(t, c.Client)
		var pods []*corev1.Pod
		for i := range 50 {
			pods = append(pods, pool(utiltesting.MakePod(fmt.Sprintf("p-%d", i), ns).Req(corev1.ResourceCPU, "100m").
				Annotation(podload.ExpectedLoadAnnotation, "cpu=1,memory=4Gi,network=25M,disk=2"), "burst"))
		}
		createPods(t, c, pods...)
		got := podsPerNode(t, c, ns, 50)
		t.Logf("pods per node: %v", got)
		if got["burst-0"] > 30 {
			t.Errorf("the idle node took %d of 50 pods, want about 21", got["burst-0"])
		}
		for i := 1; i < 4; i++ {
			if n := got[fmt.Sprintf("burst-%d", i)]; n < 5 {
				t.Errorf("node burst-%d at 30%% took %d pods, want about 10", i, n)
			}
		}
	})

	t.Run("stale", func(t *testing.T) {
		writeSample(t, client, "stale-0", 0, 5*time.Minute)
		writeSample(t, client, "stale-1", 40, 0)
		ns := createNamespace(t, c.Client)
		for i := range 3 {
			createPods(t, c, utiltesting.MakePod(fmt.Sprintf("running-%d", i), ns).Node("stale-0").
				Req(corev1.ResourceCPU, "8").Req(corev1.ResourceMemory, "32Gi").Obj())
		}
		podsPerNode(t, c, ns, 3)
		createPods(t, c, pool(utiltesting.MakePod("new", ns).Req(corev1.ResourceCPU, "100m"), "stale"))
		got := podsPerNode(t, c, ns, 4)
		if got["stale-1"] != 1 {
			t.Errorf("pods per node %v: want the new pod on stale-1, the node with a fresh sample", got)
		}
	})
}

// TestSimulatedNodeMetrics checks that a simulated node publishes its
// NodeMetrics as the agent would, with the load of the pods it runs.
func TestSimulatedNodeMetrics(t *testing.T) {
	t.Parallel()
	cluster, err := clusterfile.Parse(t.Name(), []byte(`apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: n, count: 1, cpu: "32", memory: 128Gi, baseLoad: {cpu: 10}}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Options{Cluster: cluster, Nodes: nodesim.Options{MetricsInterval: 200 * time.Millisecond}})
	client := versioned.NewForConfigOrDie(c.Config)
	ns := createNamespace(t, c.Client)
	createPods(t, c, utiltesting.MakePod("busy", ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "1").
		Annotation(podload.ExpectedLoadAnnotation, "cpu=8").Obj())
	// 10% base + 8/32 = 35%.
	localtest.Eventually(t, time.Minute, "n-0 reports 35% CPU", func(ctx context.Context) (bool, error) {
		m, err := client.AischedV1alpha1().NodeMetrics().Get(ctx, "n-0", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s := m.Status
		return s.Source == aischedv1alpha1.MetricsSourceSimulated && s.Utilization.CPU != nil && *s.Utilization.CPU == 35 &&
			time.Since(s.SampleTime.Time) < 30*time.Second && len(m.OwnerReferences) == 1, nil
	})
}
