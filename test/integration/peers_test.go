package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// limits sets a container's limits (and the requests the apiserver
// defaults from them) as the peers' manifests write them.
func limits(p *corev1.Pod, kv ...string) *corev1.Pod {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: l}
	return p
}

// TestPeerForms applies other projects' GPU and gang forms, written as
// their documentation writes them with only schedulerName set, and checks
// that each ends on the right card or share, in the right group, or is
// refused on the pod naming its key. The sources: HAMi's examples
// (examples/nvidia/: default_use.yaml, specify_card_type_to_use.yaml),
// KAI's docs/gpu-sharing (gpu-fraction, gpu-memory), Koordinator's "Gang
// Scheduling" user manual, Volcano's PodGroup annotation,
// scheduler-plugins' PodGroup CRD. Shares of several cards are
// TestMultiCardShares'.
func TestPeerForms(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: cpu, count: 1, cpu: "64", memory: 256Gi}
  - name: v100
    count: 1
    cpu: "32"
    memory: 128Gi
    gpus: {count: 2, model: Tesla-V100-SXM2-32GB, memoryMiB: 32768}
  - name: a100
    count: 1
    cpu: "32"
    memory: 128Gi
    gpus: {count: 2, model: NVIDIA-A100-SXM4-40GB, memoryMiB: 40960}
`)
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	mk := func(name string) *utiltesting.PodWrapper {
		return utiltesting.MakePod(name, ns).SchedulerName(scheduler.AischedProfile)
	}
	placed := []*corev1.Pod{
		// HAMi: one card, 3000 MiB and 30% of its cores, a V100.
		limits(mk("hami-v100").Annotation(gpu.HAMiUseTypeAnnotation, "V100").Obj(),
			"nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30"),
		// KAI: half a card; never a CPU node.
		mk("kai-fraction").Req(corev1.ResourceCPU, "100m").Annotation(gpu.KAIFractionAnnotation, "0.5").Obj(),
		// KAI's share of memory, on a card that is not a V100 (HAMi's
		// nouse-gputype).
		mk("kai-memory").Req(corev1.ResourceCPU, "100m").Annotation(gpu.KAIMemoryAnnotation, "2000").Annotation(gpu.HAMiNoUseTypeAnnotation, "V100").Obj(),
	}
	refused := map[*corev1.Pod]string{
		limits(mk("hami-percentage-and-mib").Obj(), "nvidia.com/gpu", "1", "nvidia.com/gpumem-percentage", "50", "nvidia.com/gpumem", "3000"): "resources.limits[nvidia.com/gpumem-percentage]",
		mk("kai-devices-alone").Req(corev1.ResourceCPU, "100m").Annotation(gpu.KAINumDevicesAnnotation, "2").Obj():                            gpu.KAINumDevicesAnnotation,
		mk("volcano").Req(corev1.ResourceCPU, "100m").Annotation(podgroup.VolcanoGroupAnnotation, "vc-pg").Obj():                              podgroup.VolcanoGroupAnnotation,
		mk("koord-nonstrict").Req(corev1.ResourceCPU, "100m").Annotation(podgroup.KoordinatorNameAnnotation, "loose").
			Annotation(podgroup.KoordinatorMinAvailableAnnotation, "2").Annotation(podgroup.KoordinatorModeAnnotation, "NonStrict").Obj(): podgroup.KoordinatorModeAnnotation,
	}
	createPods(t, c, placed...)
	for p := range refused {
		createPods(t, c, p)
	}
	running, unschedulable := settle(t, c, ns, len(placed)+len(refused))
	nodes := map[string]corev1.Pod{}
	for _, p := range running {
		nodes[p.Name] = p
	}
	for _, p := range placed {
		got, ok := nodes[p.Name]
		if !ok {
			t.Errorf("pod %s not running", p.Name)
			continue
		}
		if _, ok := gpu.ParseIndices(got.Annotations[gpu.AssignedAnnotation]); !ok {
			t.Errorf("pod %s on %s: no card assigned (%s=%q)", p.Name, got.Spec.NodeName, gpu.AssignedAnnotation, got.Annotations[gpu.AssignedAnnotation])
		}
	}
	for name, pool := range map[string]string{"hami-v100": "v100-", "kai-fraction": "", "kai-memory": "a100-"} {
		node := nodes[name].Spec.NodeName
		if strings.HasPrefix(node, "cpu-") || !strings.HasPrefix(node, pool) {
			t.Errorf("pod %s on node %q, want a node of pool %q (never the CPU node)", name, node, strings.TrimSuffix(pool, "-"))
		}
	}
	msgs := map[string]string{}
	for _, p := range unschedulable {
		msgs[p.Name] = unschedulableCondition(&p).Message
	}
	for p, key := range refused {
		if msg, ok := msgs[p.Name]; !ok || !strings.Contains(msg, key) {
			t.Errorf("pod %s: PodScheduled=False %q, want a message naming %s", p.Name, msg, key)
		}
	}

	// Koordinator's gang: three pods of two whole cards each on four
	// cards. Without the gang two would run; with it none does, and the
	// group says why. Then a gang that fits runs whole.
	gang := func(name string, size, gpus int) {
		for i := range size {
			createPods(t, c, mk(fmt.Sprintf("%s-%d", name, i)).Req(corev1.ResourceCPU, "100m").GPU(int64(gpus)).
				Annotation(podgroup.KoordinatorNameAnnotation, name).
				Annotation(podgroup.KoordinatorMinAvailableAnnotation, fmt.Sprint(size)).
				Annotation(podgroup.KoordinatorWaitingTimeAnnotation, "7200s").Obj())
		}
	}
	for _, p := range placed {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	gang("too-big", 3, 2)
	waitPodGroup(t, c, ns, "too-big", "says it cannot be placed", func(pg *schedulingv1alpha1.PodGroup) bool {
		c := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted)
		return c != nil && c.Reason == string(jobqueue.ReasonUnplaceable) && pg.Status.Scheduled == 0
	})
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "too-big-") && p.Spec.NodeName != "" {
			t.Errorf("gang member %s bound to %s while its gang cannot be placed whole", p.Name, p.Spec.NodeName)
		}
	}
	gang("fits", 2, 1)
	for i := range 2 {
		waitRunning(t, c, ns, fmt.Sprintf("fits-%d", i))
	}

	// scheduler-plugins' CRD allows any positive timeout; so does ours.
	client, err := versioned.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "long-wait"},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 2, ScheduleTimeoutSeconds: ptr.To[int32](7200)},
	}, metav1.CreateOptions{}); err != nil {
		t.Errorf("PodGroup with scheduleTimeoutSeconds 7200: %v", err)
	}
}

// TestVolcanoPodGroup: with Volcano's PodGroup CRD served, pods that name
// a Volcano PodGroup by its annotation gang as its minMember says: a
// group with all its members runs, one short of members is held and says
// so on its pods.
func TestVolcanoPodGroup(t *testing.T) {
	t.Parallel()
	cluster, err := clusterfile.Parse(t.Name(), []byte(`apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: n, count: 2, cpu: "8", memory: 32Gi}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Options{Cluster: cluster, DeferScheduler: true})
	ctx := context.Background()
	// Volcano's CRD, as its chart installs it (the schema cut to what aisched reads).
	installCRD(t, c, podgroup.VolcanoPodGroups, "PodGroup", apiextensionsv1.NamespaceScoped)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, c.Client)
	if err := c.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]int{"whole": 3, "short": 3} {
		if _, err := dyn.Resource(podgroup.VolcanoPodGroups).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
			"metadata": map[string]interface{}{"name": name},
			"spec":     map[string]interface{}{"minMember": int64(size)},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	member := func(name, group string) *corev1.Pod {
		return utiltesting.MakePod(name, ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "1").
			Annotation(podgroup.VolcanoGroupAnnotation, group).Obj()
	}
	createPods(t, c, member("whole-0", "whole"), member("whole-1", "whole"), member("whole-2", "whole"),
		member("short-0", "short"), member("short-1", "short"))
	for i := range 3 {
		waitRunning(t, c, ns, fmt.Sprintf("whole-%d", i))
	}
	localtest.Eventually(t, 30*time.Second, "the short group's pods say they wait for members", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "short-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := unschedulableCondition(p)
		return p.Spec.NodeName == "" && cond != nil && cond.Reason == string(jobqueue.ReasonWaitingForMembers) &&
			strings.Contains(cond.Message, "2 of its 3 members"), fmt.Errorf("node %q, condition %+v", p.Spec.NodeName, cond)
	})
}

// installCRD installs a peer's CRD, served with its schema cut to an
// object that keeps every field (aisched reads the fields it knows).
func installCRD(t *testing.T, c *local.Cluster, gvr schema.GroupVersionResource, kind string, scope apiextensionsv1.ResourceScope) {
	t.Helper()
	ext, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: gvr.Resource + "." + gvr.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvr.Group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: gvr.Resource, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: gvr.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}}}},
		},
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	localtest.Eventually(t, 30*time.Second, gvr.Resource+"."+gvr.Group+" served", func(ctx context.Context) (bool, error) {
		var err error
		if scope == apiextensionsv1.NamespaceScoped {
			_, err = dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
		} else {
			_, err = dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		}
		return err == nil, err
	})
}
