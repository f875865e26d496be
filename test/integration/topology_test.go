package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/topology"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

const (
	blockLabel = "example.com/block"
	rackLabel  = "example.com/rack"
)

// rackPools are two blocks of two racks of 4 nodes of 4 cards: rack rN's
// nodes are rN-0 .. rN-3.
const rackPools = `  - {name: r1, count: 4, cpu: "16", memory: 64Gi, labels: {example.com/block: b1, example.com/rack: r1}, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}}
  - {name: r2, count: 4, cpu: "16", memory: 64Gi, labels: {example.com/block: b1, example.com/rack: r2}, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}}
  - {name: r3, count: 4, cpu: "16", memory: 64Gi, labels: {example.com/block: b2, example.com/rack: r3}, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}}
  - {name: r4, count: 4, cpu: "16", memory: 64Gi, labels: {example.com/block: b2, example.com/rack: r4}, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}}
`

// createTopology creates an aischedtopology of the levels.
func createTopology(t *testing.T, c *local.Cluster, name string, levels ...string) {
	t.Helper()
	client, err := versioned.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	topo := &aischedv1alpha1.Topology{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, l := range levels {
		topo.Spec.Levels = append(topo.Spec.Levels, aischedv1alpha1.TopologyLevel{NodeLabel: l})
	}
	if _, err := client.AischedV1alpha1().AischedTopologies().Create(context.Background(), topo, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fillNodes binds to each node, past the scheduler, a pod that holds the
// first gpus of its cards (recorded as GPUFit records them), as running
// work of priority 0 in no group.
func fillNodes(t *testing.T, c *local.Cluster, ns string, gpus int, nodes ...string) {
	t.Helper()
	cards := make([]int, gpus)
	for i := range cards {
		cards[i] = i
	}
	for _, node := range nodes {
		p := utiltesting.MakePod("fill-"+node, ns).GPU(int64(gpus)).Node(node).
			Annotation(gpu.AssignedAnnotation, gpu.FormatIndices(cards)).Obj()
		createPods(t, c, p)
	}
}

// topoGang returns n members of group name, gpus cards each, with the
// annotations (what they ask of the topology).
func topoGang(ns, name string, n, gpus int, annotations map[string]string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		w := utiltesting.MakePod(fmt.Sprintf("%s-%d", name, i), ns).SchedulerName(scheduler.AischedProfile).
			Req(corev1.ResourceCPU, "1").Req(corev1.ResourceMemory, "1Gi").GPU(int64(gpus)).
			Label(podgroup.NameLabel, name).Label(podgroup.MinAvailableLabel, strconv.Itoa(n))
		for k, v := range annotations {
			w = w.Annotation(k, v)
		}
		out = append(out, w.Obj())
	}
	return out
}

// racksOf returns how many members of the group each rack holds (a
// node's rack is its name before "-").
func racksOf(t *testing.T, c *local.Cluster, ns, group string) map[string]int {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: podgroup.NameLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			rack, _, _ := strings.Cut(p.Spec.NodeName, "-")
			out[rack]++
		}
	}
	return out
}

// running returns a check that a PodGroup runs in domain, its Admitted
// message containing each of parts.
func runningIn(domain string, parts ...string) func(*schedulingv1alpha1.PodGroup) bool {
	return func(pg *schedulingv1alpha1.PodGroup) bool {
		cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted)
		if pg.Status.Phase != schedulingv1alpha1.PodGroupRunning || pg.Status.Domain != domain || cond == nil {
			return false
		}
		for _, p := range parts {
			if !strings.Contains(cond.Message, p) {
				return false
			}
		}
		return true
	}
}

// TestTopologyPlacement places gangs that ask for racks and blocks
// (topology.aisched.io/*) on two blocks of two racks of 4 nodes, with the
// real apiserver and scheduler: a gang that fits only inside one rack
// lands there; a small gang goes to the fullest rack that holds it, not to
// a free one; a gang whose preferred level does not fit falls back to the
// required one and says so; slices are balanced; a waiting gang's rack is
// reserved and not nibbled; preemption frees one rack.
func TestTopologyPlacement(t *testing.T) {
	t.Parallel()
	c := startCluster(t, rackPools)
	createTopology(t, c, "racks", blockLabel, rackLabel)
	ctx := context.Background()
	rack := map[string]string{aischedv1alpha1.TopologyRequiredKey: rackLabel}

	t.Run("best fit and only inside one rack", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		defer deletePods(t, c, ns)
		// Free nodes: r1 2, r2 1, r3 none, r4 4.
		fillNodes(t, c, ns, 4, "r1-0", "r1-1", "r2-0", "r2-1", "r2-2", "r3-0", "r3-1", "r3-2", "r3-3")
		createPods(t, c, topoGang(ns, "small", 2, 4, rack)...)
		waitPodGroup(t, c, ns, "small", "running in rack r1", runningIn("example.com/rack=r1", "inside rack r1"))
		if diff := cmp.Diff(map[string]int{"r1": 2}, racksOf(t, c, ns, "small")); diff != "" {
			t.Errorf("small, by rack (-want,+got):\n%s", diff)
		}
		// Without topology it could take r2-3 and any other node; inside
		// one rack, only r4 holds 4.
		createPods(t, c, topoGang(ns, "four", 4, 4, rack)...)
		waitPodGroup(t, c, ns, "four", "running in rack r4", runningIn("example.com/rack=r4"))
		if diff := cmp.Diff(map[string]int{"r4": 4}, racksOf(t, c, ns, "four")); diff != "" {
			t.Errorf("four, by rack (-want,+got):\n%s", diff)
		}
	})

	t.Run("preferred falls back to required", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		defer deletePods(t, c, ns)
		fillNodes(t, c, ns, 4, "r1-0")
		createPods(t, c, topoGang(ns, "six", 6, 4, map[string]string{
			aischedv1alpha1.TopologyRequiredKey: blockLabel, aischedv1alpha1.TopologyPreferredKey: rackLabel})...)
		// No rack holds 6; b1 (7 free nodes) is fuller than b2 (8).
		pg := waitPodGroup(t, c, ns, "six", "running in block b1", runningIn("example.com/block=b1",
			"inside block b1", "no rack (example.com/rack) (preferred) holds it: the best, rack r2, holds 4 of its 6 members"))
		t.Logf("six: %s", meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted).Message)
		got := racksOf(t, c, ns, "six")
		if got["r3"]+got["r4"] > 0 || got["r1"]+got["r2"] != 6 {
			t.Errorf("six by rack %v, want all 6 in block b1 (r1, r2)", got)
		}
	})

	t.Run("slices are balanced", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		defer deletePods(t, c, ns)
		// r1 and r2 have 3 free nodes each; block b2 is full.
		fillNodes(t, c, ns, 4, "r1-0", "r2-0", "r3-0", "r3-1", "r3-2", "r3-3", "r4-0", "r4-1", "r4-2", "r4-3")
		createPods(t, c, topoGang(ns, "tp", 4, 4, map[string]string{aischedv1alpha1.TopologyRequiredKey: blockLabel,
			aischedv1alpha1.TopologySliceLevelKey: rackLabel, aischedv1alpha1.TopologySliceSizeKey: "2"})...)
		waitPodGroup(t, c, ns, "tp", "running in block b1", runningIn("example.com/block=b1", "slices of 2: 2 in rack r1, 2 in rack r2"))
		// Best fit alone would put 3 in r1 and 1 in r2.
		if diff := cmp.Diff(map[string]int{"r1": 2, "r2": 2}, racksOf(t, c, ns, "tp")); diff != "" {
			t.Errorf("tp, by rack (-want,+got):\n%s", diff)
		}
	})

	t.Run("a waiting gang's rack is reserved", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		defer deletePods(t, c, ns)
		fillNodes(t, c, ns, 2, "r1-0", "r1-1", "r1-2", "r1-3", "r2-0", "r2-1", "r2-2", "r2-3")
		fillNodes(t, c, ns, 4, "r3-0", "r3-1", "r3-2", "r3-3", "r4-0", "r4-1", "r4-2", "r4-3")
		createPods(t, c, topoGang(ns, "big", 4, 4, rack)...)
		reservedRack := regexp.MustCompile(`4 nodes of rack (r[12]) are reserved for it`)
		pg := waitPodGroup(t, c, ns, "big", "waiting with a rack reserved", func(pg *schedulingv1alpha1.PodGroup) bool {
			cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted)
			return cond != nil && cond.Reason == string(jobqueue.ReasonWaitingForCapacity) && reservedRack.MatchString(cond.Message)
		})
		msg := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted).Message
		t.Logf("big: %s", msg)
		if !strings.Contains(msg, "needs 4 pods placed at once inside one rack (example.com/rack)") {
			t.Errorf("message %q does not say what it waits for", msg)
		}
		reserved := reservedRack.FindStringSubmatch(msg)[1]
		other := map[string]string{"r1": "r2", "r2": "r1"}[reserved]
		// Pods in no group that would take the reserved rack's free cards
		// wait; the other rack's free cards are theirs.
		nibbler := func(name, rack string) *corev1.Pod {
			p := utiltesting.MakePod(name, ns).SchedulerName(scheduler.AischedProfile).GPU(1).Obj()
			p.Spec.NodeSelector = map[string]string{rackLabel: rack}
			return p
		}
		createPods(t, c, nibbler("nibble-reserved", reserved), nibbler("nibble-other", other))
		waitRunning(t, c, ns, "nibble-other")
		localtest.Eventually(t, 30*time.Second, "nibble-reserved held off the reserved rack", func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "nibble-reserved", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Spec.NodeName != "" {
				return false, fmt.Errorf("bound to %s, a node reserved for big", p.Spec.NodeName)
			}
			cond := unschedulableCondition(p)
			return cond != nil && strings.Contains(cond.Message, "reserved by the job queue for pod group "+ns+"/big"), nil
		})
		// The reserved rack's pods end: big starts there.
		for i := range 4 {
			if err := c.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("fill-%s-%d", reserved, i), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Fatal(err)
			}
		}
		waitPodGroup(t, c, ns, "big", "running in the reserved rack", runningIn(rackLabel+"="+reserved))
		if diff := cmp.Diff(map[string]int{reserved: 4}, racksOf(t, c, ns, "big")); diff != "" {
			t.Errorf("big, by rack (-want,+got):\n%s", diff)
		}
	})

	t.Run("preemption frees one rack", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		defer deletePods(t, c, ns)
		createPriorityClasses(t, c, map[string]int32{"topology-high": 1000})
		// r1 has 1 free node, r2 2; b2 is full. One victim anywhere would
		// do without topology; inside one rack, r2's two are the fewest.
		fillNodes(t, c, ns, 4, "r1-0", "r1-1", "r1-2", "r2-0", "r2-1", "r3-0", "r3-1", "r3-2", "r3-3", "r4-0", "r4-1", "r4-2", "r4-3")
		urgent := topoGang(ns, "urgent", 4, 4, rack)
		for _, p := range urgent {
			p.Spec.PriorityClassName = "topology-high"
		}
		createPods(t, c, urgent...)
		waitPodGroup(t, c, ns, "urgent", "running in rack r2", runningIn("example.com/rack=r2"))
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var fills []string
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, "fill-") && p.DeletionTimestamp == nil {
				fills = append(fills, strings.TrimPrefix(p.Name, "fill-"))
			}
		}
		slices.Sort(fills)
		want := []string{"r1-0", "r1-1", "r1-2", "r3-0", "r3-1", "r3-2", "r3-3", "r4-0", "r4-1", "r4-2", "r4-3"}
		if diff := cmp.Diff(want, fills); diff != "" {
			t.Errorf("pods left after preemption (-want,+got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]int{"r2": 4}, racksOf(t, c, ns, "urgent")); diff != "" {
			t.Errorf("urgent, by rack (-want,+got):\n%s", diff)
		}
	})
}

// peerPools are rackPools with every peer's labels: Kueue's and KAI's
// (cloud.provider.com/topology-block and -rack, as their documentation
// names them) and Koordinator's (network.topology.nvidia.com/spine and
// block, as topograph writes them: a block of theirs is a rack here).
const peerPools = `  - {name: r1, count: 4, cpu: "16", memory: 64Gi, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}, labels: {cloud.provider.com/topology-block: b1, cloud.provider.com/topology-rack: r1, network.topology.nvidia.com/spine: s1, network.topology.nvidia.com/block: r1}}
  - {name: r2, count: 4, cpu: "16", memory: 64Gi, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}, labels: {cloud.provider.com/topology-block: b1, cloud.provider.com/topology-rack: r2, network.topology.nvidia.com/spine: s1, network.topology.nvidia.com/block: r2}}
  - {name: r3, count: 4, cpu: "16", memory: 64Gi, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}, labels: {cloud.provider.com/topology-block: b2, cloud.provider.com/topology-rack: r3, network.topology.nvidia.com/spine: s2, network.topology.nvidia.com/block: r3}}
  - {name: r4, count: 4, cpu: "16", memory: 64Gi, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}, labels: {cloud.provider.com/topology-block: b2, cloud.provider.com/topology-rack: r4, network.topology.nvidia.com/spine: s2, network.topology.nvidia.com/block: r4}}
`

// peerTopologyResources are the peers' resources of testdata/peer-topology.
var peerTopologyResources = map[string]struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}{
	"Topology/kueue.x-k8s.io":                          {schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "topologies"}, false},
	"Topology/kai.scheduler":                           {schema.GroupVersionResource{Group: "kai.scheduler", Version: "v1alpha1", Resource: "topologies"}, false},
	"HyperNode/topology.volcano.sh":                    {schema.GroupVersionResource{Group: "topology.volcano.sh", Version: "v1alpha1", Resource: "hypernodes"}, false},
	"ClusterNetworkTopology/scheduling.koordinator.sh": {schema.GroupVersionResource{Group: "scheduling.koordinator.sh", Version: "v1alpha1", Resource: "clusternetworktopologies"}, false},
	"PodGroup/scheduling.volcano.sh":                   {podgroup.VolcanoPodGroups, true},
	"PodGroup/scheduling.x-k8s.io":                     {schedulingv1alpha1.SchemeGroupVersion.WithResource("podgroups"), true},
	"Job/batch":                                        {batchv1.SchemeGroupVersion.WithResource("jobs"), true},
}

// applyPeerFile creates the objects of a testdata/peer-topology file: the
// cluster-scoped ones when clusterScoped, else the others in ns.
func applyPeerFile(t *testing.T, dyn dynamic.Interface, path, ns string, clusterScoped bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj map[string]interface{}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		res, ok := peerTopologyResources[u.GetKind()+"/"+u.GroupVersionKind().Group]
		if !ok {
			t.Fatalf("%s: no resource for %s", path, u.GroupVersionKind())
		}
		switch {
		case res.namespaced && !clusterScoped:
			_, err = dyn.Resource(res.gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
		case !res.namespaced && clusterScoped:
			_, err = dyn.Resource(res.gvr).Create(context.Background(), u, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", path, u.GetName(), err)
		}
	}
}

// podsBy returns how many pods of ns each rack holds, of the pods whose
// name starts with prefix.
func podsBy(t *testing.T, c *local.Cluster, ns, prefix string) map[string]int {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix) && p.Spec.NodeName != "" {
			rack, _, _ := strings.Cut(p.Spec.NodeName, "-")
			out[rack]++
		}
	}
	return out
}

// TestTopologyPeerForms applies each peer's topology and workload, written
// from its documentation (testdata/peer-topology, each file says where
// from), on two blocks of two racks of 4 nodes, and checks that each is
// placed with its meaning: Kueue's required rack, KAI's required block
// with a preferred rack (which does not hold 6: it falls back) and its
// segments (every 2 members in one rack, by the level's alias), Volcano's
// hard networkTopology inside one HyperNode of tier 1, Koordinator's
// MustGather spine with a PreferGather block; and that what aisched cannot
// honour is refused on the pod naming the key (a pod in no group asking
// for a domain, Kueue's pod set groups).
func TestTopologyPeerForms(t *testing.T) {
	t.Parallel()
	cluster, err := clusterfile.Parse(t.Name(), []byte("apiVersion: aisched.io/v1alpha1\nkind: Cluster\nnodePools:\n"+peerPools))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Options{Cluster: cluster, DeferScheduler: true})
	for key, res := range peerTopologyResources {
		if res.gvr.Group == "batch" || res.gvr.Group == schedulingv1alpha1.SchemeGroupVersion.Group {
			continue
		}
		scope := apiextensionsv1.ClusterScoped
		if res.namespaced {
			scope = apiextensionsv1.NamespaceScoped
		}
		kind, _, _ := strings.Cut(key, "/")
		installCRD(t, c, res.gvr, kind, scope)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"kueue", "kai", "volcano", "koordinator"} {
		applyPeerFile(t, dyn, "testdata/peer-topology/"+f+".yaml", "", true)
	}
	ctx := context.Background()
	if err := c.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	// oneOf reports whether every pod is in one of the groups of racks.
	oneOf := func(got map[string]int, groups ...[]string) bool {
		for _, g := range groups {
			n := 0
			for _, r := range g {
				n += got[r]
			}
			if n > 0 {
				return n == sum(got)
			}
		}
		return false
	}
	node := func(name, ns string) *utiltesting.PodWrapper {
		return utiltesting.MakePod(name, ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "1").GPU(4)
	}

	t.Run("Kueue", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		defer deletePods(t, c, ns)
		applyPeerFile(t, dyn, "testdata/peer-topology/kueue.yaml", ns, false)
		pg := waitPodGroup(t, c, ns, "tas-sample-required", "running in one rack", func(pg *schedulingv1alpha1.PodGroup) bool {
			return pg.Status.Phase == schedulingv1alpha1.PodGroupRunning && strings.HasPrefix(pg.Status.Domain, "cloud.provider.com/topology-rack=")
		})
		got := podsBy(t, c, ns, "tas-sample-required")
		if len(got) != 1 || sum(got) != 3 {
			t.Errorf("pods by rack %v, want 3 in one rack (domain %s)", got, pg.Status.Domain)
		}
	})

	t.Run("KAI", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		defer deletePods(t, c, ns)
		applyPeerFile(t, dyn, "testdata/peer-topology/kai.yaml", ns, false)
		waitPodGroup(t, c, ns, "block-prefer-rack", "running in one block", func(pg *schedulingv1alpha1.PodGroup) bool {
			cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted)
			return pg.Status.Phase == schedulingv1alpha1.PodGroupRunning && strings.HasPrefix(pg.Status.Domain, "cloud.provider.com/topology-block=") &&
				cond != nil && strings.Contains(cond.Message, "no rack (cloud.provider.com/topology-rack) (preferred) holds it")
		})
		if got := podsBy(t, c, ns, "block-prefer-rack"); !oneOf(got, []string{"r1", "r2"}, []string{"r3", "r4"}) || sum(got) != 6 {
			t.Errorf("block-prefer-rack by rack %v, want 6 in one block", got)
		}
		waitPodGroup(t, c, ns, "pytorch-tp2", "running", func(pg *schedulingv1alpha1.PodGroup) bool {
			return pg.Status.Phase == schedulingv1alpha1.PodGroupRunning
		})
		for rack, n := range podsBy(t, c, ns, "pytorch-tp2") {
			if n%2 != 0 {
				t.Errorf("rack %s holds %d members of pytorch-tp2: a segment of 2 is split", rack, n)
			}
		}
	})

	t.Run("Volcano", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		defer deletePods(t, c, ns)
		applyPeerFile(t, dyn, "testdata/peer-topology/volcano.yaml", ns, false)
		for i := range 4 {
			createPods(t, c, node(fmt.Sprintf("network-topology-job-t0-%d", i), ns).Annotation(podgroup.VolcanoGroupAnnotation, "network-topology-job").Obj())
		}
		waitRunningPods(t, c, ns, "network-topology-job", 4)
		if got := podsBy(t, c, ns, "network-topology-job"); len(got) != 1 {
			t.Errorf("pods by rack %v, want 4 in one HyperNode of tier 1 (one rack)", got)
		}
	})

	t.Run("Koordinator", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		defer deletePods(t, c, ns)
		applyPeerFile(t, dyn, "testdata/peer-topology/koordinator.yaml", ns, false)
		for i := range 6 {
			createPods(t, c, node(fmt.Sprintf("training-worker-%d", i), ns).Label(schedulingv1alpha1.OldPodGroupLabel, "training-job").Obj())
		}
		waitPodGroup(t, c, ns, "training-job", "running in one spine", func(pg *schedulingv1alpha1.PodGroup) bool {
			return pg.Status.Phase == schedulingv1alpha1.PodGroupRunning && strings.HasPrefix(pg.Status.Domain, "SpineLayer=")
		})
		if got := podsBy(t, c, ns, "training-worker"); !oneOf(got, []string{"r1", "r2"}, []string{"r3", "r4"}) || sum(got) != 6 {
			t.Errorf("training-job by rack %v, want 6 in one spine", got)
		}
	})

	t.Run("refused on the pod", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		defer deletePods(t, c, ns)
		lone := node("lone", ns).Annotation(topology.KAITopology, "cluster-topology").Annotation(topology.KAIRequired, "cloud.provider.com/topology-rack").Obj()
		grouped := node("grouped", ns).Label(podgroup.NameLabel, "grouped").Label(podgroup.MinAvailableLabel, "1").Obj()
		var sets []*corev1.Pod
		for i := range 2 {
			sets = append(sets, node(fmt.Sprintf("sets-%d", i), ns).Label(podgroup.NameLabel, "sets").Label(podgroup.MinAvailableLabel, "2").
				Annotation(topology.KueueRequired, "cloud.provider.com/topology-rack").Annotation(topology.KueuePodSetGroupName, "leader").Obj())
		}
		createPods(t, c, append(sets, lone, grouped)...)
		for name, want := range map[string]string{
			"lone":   "annotation kai.scheduler/topology-required-placement: a topology domain holds the members of a pod group together, and this pod is in none",
			"sets-0": `annotation kueue.x-k8s.io/podset-group-name="leader": not supported: aisched places one pod group at a time`,
		} {
			localtest.Eventually(t, time.Minute, name+" says why", func(ctx context.Context) (bool, error) {
				p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				cond := unschedulableCondition(p)
				return p.Spec.NodeName == "" && cond != nil && strings.Contains(cond.Message, want), fmt.Errorf("node %q, condition %+v", p.Spec.NodeName, cond)
			})
		}
		// A group of one asks nothing a single node does not hold.
		waitRunning(t, c, ns, "grouped")
	})
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// waitRunningPods waits until want pods of ns whose name starts with
// prefix run.
func waitRunningPods(t *testing.T, c *local.Cluster, ns, prefix string, want int) {
	t.Helper()
	localtest.Eventually(t, time.Minute, fmt.Sprintf("%d pods %s* running", want, prefix), func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, prefix) && p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		return n == want, nil
	})
}
