package throughput

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
)

// What a case runs on: the scheduler configuration, the cluster, the pods
// that fill it before, and the pods measured.

// upstreamConfig is kube-scheduler's defaults: one default-scheduler profile.
const upstreamConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
`

// profileConfig returns a scheduler configuration with the one profile
// measured: default-scheduler exactly as upstream ships it (in aisched up
// it shares aisched's queue order, which every profile of one scheduler
// must), any other as in base, or in aisched up when base is nil.
func profileConfig(profile string, base *config.KubeSchedulerConfiguration) (*config.KubeSchedulerConfiguration, error) {
	if profile == "default-scheduler" {
		return scheduler.DecodeConfig([]byte(upstreamConfig))
	}
	if base == nil {
		var err error
		if base, err = scheduler.LocalConfig(); err != nil {
			return nil, err
		}
	}
	p := scheduler.FindProfile(base, profile)
	if p == nil {
		return nil, fmt.Errorf("no profile %q in the scheduler configuration", profile)
	}
	cfg := base.DeepCopy()
	cfg.Profiles = []config.KubeSchedulerProfile{*p.DeepCopy()}
	return cfg, nil
}

func benchCluster(opts Options) *clusterfile.Cluster {
	pool := clusterfile.NodePool{
		Name:             "node",
		Count:            opts.Nodes,
		CPU:              clusterfile.Quantity{Quantity: resource.MustParse("32")},
		Memory:           clusterfile.Quantity{Quantity: resource.MustParse("128Gi")},
		EphemeralStorage: clusterfile.Quantity{Quantity: clusterfile.DefaultEphemeralStorage},
		MaxPods:          clusterfile.DefaultMaxPods,
		Topology:         rackLevels(opts.RackNodes),
	}
	if opts.GPU || opts.Shared {
		pool.GPUs = &clusterfile.GPUs{Count: 8, Model: "NVIDIA-A100-SXM4-40GB", MemoryMiB: 40960, CUDACores: 6912,
			ComputeCapability: "8.0", MemoryBandwidthGBps: 1555, MaxClockMHz: 1410}
	}
	draPool(&pool, opts)
	return &clusterfile.Cluster{APIVersion: clusterfile.APIVersion, Kind: clusterfile.Kind, NodePools: []clusterfile.NodePool{pool}}
}

// groupName is the pod group of pod i in groups of size.
func groupName(i, size int) string {
	return fmt.Sprintf("group-%05d", i/size)
}

// nativeGroup is the native PodGroup of pod i of a native case: a gang of
// the group size, inside one rack when racks is set.
func nativeGroup(i int, ns string, bc benchCase, racks bool) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: groupName(i, bc.groupSize), Namespace: ns},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(bc.groupSize)},
		}},
	}
	if racks {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedulingv1beta1.TopologyConstraint{{Key: RackLabel}},
		}
	}
	return pg
}

// createGroups creates the native PodGroups of a native case.
func createGroups(ctx context.Context, c *local.Cluster, ns string, bc benchCase, opts Options) error {
	for i := 0; i < opts.Pods; i += bc.groupSize {
		pg := nativeGroup(i, ns, bc, opts.RackNodes > 0)
		if _, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("native PodGroup: %w", err)
		}
	}
	return nil
}

// fillCards is how many of a node's 8 cards fill holds.
func fillCards(fill float64) int { return int(math.Round(fill * 8)) }

// fillLabel marks the pods that fill holds cards with, which the
// measurement does not count.
const fillLabel = "bench.aisched.io/fill"

// checkFill bounds --fill and checks that the pods fit the cards it
// leaves: a bench whose pods cannot all be placed would only time out.
func checkFill(opts Options) error {
	switch {
	case math.IsNaN(opts.Fill) || opts.Fill < 0 || opts.Fill > 0.9:
		return fmt.Errorf("--fill %g: want a share of every node's cards from 0 to 0.9", opts.Fill)
	case opts.Fill > 0 && !opts.GPU && !opts.Shared:
		return fmt.Errorf("--fill %g holds cards: give --gpu or --shared", opts.Fill)
	}
	free := int64(opts.Nodes) * int64(8-fillCards(opts.Fill))
	need := int64(opts.Pods) // one card each
	if opts.Shared {
		need = (int64(opts.Pods) + 3) / 4 // a quarter of a card each
	}
	if (opts.GPU || opts.Shared) && need > free {
		return fmt.Errorf("--pods %d need %d cards, and --nodes %d with --fill %g leave %d free: lower --pods or --fill", opts.Pods, need, opts.Nodes, opts.Fill, free)
	}
	return nil
}

// fill binds, past the scheduler, a pod to every node that holds the
// first cards of it (their assignment in gpu.aisched.io/assigned, as
// GPUFit would write it), so that opts.Fill of every node's cards is held
// before the measured pods come.
func fill(ctx context.Context, c *local.Cluster, ns string, opts Options) error {
	n := fillCards(opts.Fill)
	if n == 0 {
		return nil
	}
	cards := make([]int, n)
	for i := range cards {
		cards[i] = i
	}
	q := *resource.NewQuantity(int64(n), resource.DecimalSI)
	for _, pool := range benchCluster(opts).NodePools {
		for i := range pool.Count {
			node := pool.NodeName(i)
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "fill-" + node, Namespace: ns, Labels: map[string]string{fillLabel: "true"},
					Annotations: map[string]string{gpu.AssignedAnnotation: gpu.FormatIndices(cards)}},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "bench",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu.ResourceName: q}, Limits: corev1.ResourceList{gpu.ResourceName: q}}}}},
			}
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("fill node %s: %w", node, err)
			}
		}
	}
	return nil
}

// benchPodName is the name of pod i of a case.
func benchPodName(i int) string { return fmt.Sprintf("pod-%05d", i) }

// benchPod is pod i of a case: in its group's native PodGroup, or labelled
// with the pod-group labels (and, with racks, asking for one rack), or
// plain; with the annotations given, which it does not change.
func benchPod(i int, ns string, bc benchCase, racks bool, annotations map[string]string, requests, limits corev1.ResourceList) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: benchPodName(i), Namespace: ns, Annotations: annotations},
		Spec: corev1.PodSpec{
			SchedulerName: bc.profile,
			Containers: []corev1.Container{{
				Name: "c", Image: "bench",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
			}},
		},
	}
	switch {
	case bc.groupSize == 0:
	case bc.native:
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(groupName(i, bc.groupSize))}
	default:
		pod.Labels = map[string]string{
			podgroup.NameLabel:         groupName(i, bc.groupSize),
			podgroup.MinAvailableLabel: strconv.Itoa(bc.groupSize),
		}
		if racks {
			pod.Annotations = maps.Clone(annotations)
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[aischedv1alpha1.TopologyRequiredKey] = RackLabel
		}
	}
	return pod
}

// createPods creates the pods (and native PodGroups, or the rack
// topology of aisched's gangs) with 32 concurrent clients.
func createPods(ctx context.Context, c *local.Cluster, ns string, bc benchCase, opts Options) error {
	racks := opts.RackNodes > 0 && bc.groupSize > 0
	switch {
	case bc.native:
		if err := createGroups(ctx, c, ns, bc, opts); err != nil {
			return err
		}
	case racks:
		if err := createRackTopology(ctx, c.Config); err != nil {
			return err
		}
	}
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	limits := corev1.ResourceList{}
	var annotations map[string]string
	switch {
	case opts.DRA:
		// The card is claimed (claimPod).
	case opts.GPU:
		requests[gpu.ResourceName] = resource.MustParse("1")
		limits[gpu.ResourceName] = resource.MustParse("1")
	case opts.Shared:
		annotations = map[string]string{gpu.MilliAnnotation: "250"}
	}
	next := make(chan int)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				pod := benchPod(i, ns, bc, racks, annotations, requests, limits)
				err := claimPod(ctx, c.Client, opts, pod)
				if err == nil {
					_, err = c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	var err error
	for i := range opts.Pods {
		select {
		case next <- i:
			continue
		case err = <-errs:
		}
		break
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}
