package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/scheduler"
)

// narrowConfig has one profile, GPUClaims in place of DynamicResources,
// that tries a DRA GPU pod on one empty node besides the nodes in use.
const narrowConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
  - schedulerName: narrow
    percentageOfNodesToScore: 0
    plugins:
      multiPoint:
        disabled:
          - name: DynamicResources
        enabled:
          - name: GPUClaims
            weight: 2
    pluginConfig:
      - name: GPUClaims
        args:
          emptyNodesToTry: 1
`

// A narrowed cycle whose nodes other filters all reject sends the pod
// back to be tried on every node: on three small GPU nodes and one large
// one, all empty, a pod that fits only the large one is tried first on
// one small node (the first of the nodes in order), told so, and then
// placed on the large one.
func TestDRANarrowing(t *testing.T) {
	t.Parallel()
	cluster, err := clusterfile.Parse(t.Name(), []byte(`apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: a-small, count: 3, cpu: "2", memory: 8Gi, gpus: {count: 1, model: NVIDIA-A100-SXM4-80GB, memoryMiB: 81920, computeCapability: "8.0", dra: {}}}
  - {name: z-large, count: 1, cpu: "16", memory: 64Gi, gpus: {count: 1, model: NVIDIA-A100-SXM4-80GB, memoryMiB: 81920, computeCapability: "8.0", dra: {}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := scheduler.DecodeConfig([]byte(narrowConfig))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Options{Cluster: cluster, SchedulerConfig: cfg})
	ns := "dra-narrow"
	draNamespace(t, c, ns)
	draClaim(t, c, ns, "c", nvidiadra.GPUClass, "", nil)
	pod := claimPod(ns, "big", "narrow", "c", "")
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	createPods(t, c, pod)
	allocatedDevices(t, c, ns, "big", "c")

	got, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.Spec.NodeName, "z-large") {
		t.Errorf("pod on %s, want the large node", got.Spec.NodeName)
	}
	const want = "no node fits of the 1 tried first"
	localtest.Eventually(t, time.Minute, "a FailedScheduling event of the narrowed cycle", func(ctx context.Context) (bool, error) {
		events, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("regarding.name", "big").String()})
		if err != nil {
			return false, err
		}
		var notes []string
		for _, e := range events.Items {
			if e.Reason == "FailedScheduling" && strings.Contains(e.Note, want) {
				return true, nil
			}
			notes = append(notes, e.Reason+": "+e.Note)
		}
		return false, fmt.Errorf("events: %s", strings.Join(notes, "; "))
	})
}

// The aisched profile runs GPUClaims' PostFilter before Coscheduling's, so
// that a narrowed cycle's miss (UnschedulableAndUnresolvable) ends the
// PostFilter plugins before Coscheduling would release a gang or back off
// a team queue's admission for it. (Checked on TestDRANodesWithoutRoom's
// cluster, which runs the built-in profiles.)
func checkPostFilterOrder(t *testing.T, c *local.Cluster) {
	t.Helper()
	plugins, ok := c.SchedulerPlugins(scheduler.AischedProfile)
	if !ok {
		t.Fatal("no aisched profile running")
	}
	var order []string
	for _, p := range plugins.PostFilter.Enabled {
		order = append(order, p.Name)
	}
	claims, cosched := slices.Index(order, "GPUClaims"), slices.Index(order, "Coscheduling")
	if claims < 0 || cosched < 0 || claims > cosched {
		t.Errorf("aisched's PostFilter plugins %v: want GPUClaims before Coscheduling", order)
	}
}
