package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/podgroup"
)

// The DRA pools of the tests: cards NVIDIA's DRA driver publishes, shared
// by consumable memory on one node, in MIG mode on the other.
const draPools = `  - {name: mixed, count: 1, cpu: "16", memory: 64Gi}
  - name: share
    count: 1
    cpu: "16"
    memory: 64Gi
    gpus: {count: 2, model: NVIDIA-A100-SXM4-80GB, memoryMiB: 81920, computeCapability: "8.0", dra: {consumableShares: memory}}
  - name: mig
    count: 1
    cpu: "16"
    memory: 64Gi
    gpus: {count: 2, model: NVIDIA-A100-SXM4-80GB, memoryMiB: 81920, computeCapability: "8.0", dra: {mig: [3g.40gb, 1g.10gb, 1g.10gb]}}
  - name: gang
    count: 1
    cpu: "16"
    memory: 64Gi
    gpus: {count: 1, model: NVIDIA-H100-80GB-HBM3, memoryMiB: 81920, computeCapability: "9.0", dra: {dynamicMIG: true}}
`

// draNamespace creates a namespace for a subtest.
func draNamespace(t *testing.T, c *local.Cluster, ns string) {
	t.Helper()
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// draClaim creates a claim with one request of the class, and returns it.
func draClaim(t *testing.T, c *local.Cluster, ns, name, class, selector string, capacity map[resourcev1.QualifiedName]resource.Quantity) *resourcev1.ResourceClaim {
	t.Helper()
	e := &resourcev1.ExactDeviceRequest{DeviceClassName: class}
	if selector != "" {
		e.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: selector}}}
	}
	if capacity != nil {
		e.Capacity = &resourcev1.CapacityRequirements{Requests: capacity}
	}
	claim, err := c.Client.ResourceV1().ResourceClaims(ns).Create(context.Background(), &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: e}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return claim
}

// claimPod is a pod of profile that uses the named claim, on node when
// one is given.
func claimPod(ns, name, profile, claim, node string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName:  profile,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}},
			Containers: []corev1.Container{{Name: "main", Image: "busybox",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}
	if node != "" {
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	}
	return p
}

// allocatedDevices waits until the pod runs and returns the devices its
// claim got.
func allocatedDevices(t *testing.T, c *local.Cluster, ns, pod, claim string) []string {
	t.Helper()
	var devices []string
	localtest.Eventually(t, time.Minute, "pod "+pod+" running with its claim allocated", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cl, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		devices = nil
		if a := cl.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				devices = append(devices, r.Device)
			}
		}
		return p.Status.Phase == corev1.PodRunning && len(devices) > 0,
			fmt.Errorf("pod %s on %q, phase %s %s, conditions %+v; claim devices %v", pod, p.Spec.NodeName, p.Status.Phase, p.Status.Message, p.Status.Conditions, devices)
	})
	return devices
}

// deviceAttr reads a string attribute of a device of node's slices.
func deviceAttr(t *testing.T, c *local.Cluster, node, device, attr string) string {
	t.Helper()
	list, err := c.Client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range list.Items {
		for _, d := range sl.Spec.Devices {
			if ptr.Deref(sl.Spec.NodeName, "") == node && d.Name == device {
				return ptr.Deref(d.Attributes[resourcev1.QualifiedName(attr)].StringValue, "")
			}
		}
	}
	t.Fatalf("no device %s on node %s", device, node)
	return ""
}

// wholeOrHalf creates a claim for a whole GPU, else a 3g.40gb MIG
// partition (a prioritized list).
func wholeOrHalf(t *testing.T, c *local.Cluster, ns, name string) {
	t.Helper()
	_, err := c.Client.ResourceV1().ResourceClaims(ns).Create(context.Background(), &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu",
			FirstAvailable: []resourcev1.DeviceSubRequest{
				{Name: "whole", DeviceClassName: nvidiadra.GPUClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
				{Name: "half", DeviceClassName: nvidiadra.MIGClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
					Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
						Expression: "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}}}},
			},
		}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

const memorySelector = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('%s')) >= 0"

// TestDRAChoice: DRA GPU claims get aisched's choice of device, where
// upstream's DynamicResources (default-scheduler, in the same cluster)
// takes the first that fits; every allocation is written by upstream's
// plugin and prepared by the simulated kubelet, which refuses a device
// given twice.
func TestDRAChoice(t *testing.T) {
	t.Parallel()
	c := startCluster(t, draPools)
	ctx := context.Background()

	t.Run("best fit, not first, never a tainted device", func(t *testing.T) {
		// Node mixed-0 gets cards from slices of its own: gpu-0 80 GiB,
		// gpu-1 40 GiB with the driver's XID taint, gpu-2 40 GiB.
		cards := []gpu.Card{
			{Index: 0, UUID: "GPU-m0", Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, ComputeCapability: 8, Healthy: true},
			{Index: 1, UUID: "GPU-m1", Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, ComputeCapability: 8, Healthy: false},
			{Index: 2, UUID: "GPU-m2", Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, ComputeCapability: 8, Healthy: true},
		}
		for _, sl := range nvidiadra.Slices("mixed-0", cards, nvidiadra.Options{}) {
			if _, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, sl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		ns := "dra-bestfit"
		draNamespace(t, c, ns)
		for _, tc := range []struct{ profile, want string }{
			// 30 GiB fits all three: upstream takes gpu-0 (the first);
			// aisched the 40 GiB gpu-2 (gpu-1 fits best but is tainted).
			{"aisched", "gpu-2"},
			{"default-scheduler", "gpu-0"},
		} {
			claim := draClaim(t, c, ns, "c-"+tc.profile, nvidiadra.GPUClass, fmt.Sprintf(memorySelector, "30Gi"), nil)
			createPods(t, c, claimPod(ns, "p-"+tc.profile, tc.profile, claim.Name, "mixed-0"))
			if got := allocatedDevices(t, c, ns, "p-"+tc.profile, claim.Name); len(got) != 1 || got[0] != tc.want {
				t.Errorf("%s: the claim got %v, want %s", tc.profile, got, tc.want)
			}
			// Free the node for the next profile.
			if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "p-"+tc.profile, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Fatal(err)
			}
			if err := c.Client.ResourceV1().ResourceClaims(ns).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			localtest.Eventually(t, time.Minute, "claim "+claim.Name+" deallocated and gone", func(ctx context.Context) (bool, error) {
				_, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), err
			})
		}
	})

	t.Run("shares pack by consumable capacity", func(t *testing.T) {
		ns := "dra-shares"
		draNamespace(t, c, ns)
		// A share already on gpu-1 (its claim names the card's UUID);
		// first fit would put the next on gpu-0.
		uuid := deviceAttr(t, c, "share-0", "gpu-1", "uuid")
		draClaim(t, c, ns, "old", nvidiadra.GPUClass, fmt.Sprintf("device.attributes['gpu.nvidia.com'].uuid == '%s'", uuid),
			map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("8Gi")})
		createPods(t, c, claimPod(ns, "old", "aisched", "old", "share-0"))
		if got := allocatedDevices(t, c, ns, "old", "old"); len(got) != 1 || got[0] != "gpu-1" {
			t.Fatalf("the first share got %v, want gpu-1 (its selector)", got)
		}
		for _, name := range []string{"s1", "s2"} {
			draClaim(t, c, ns, name, nvidiadra.GPUClass, "", map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("10Gi")})
			createPods(t, c, claimPod(ns, name, "aisched", name, "share-0"))
			if got := allocatedDevices(t, c, ns, name, name); len(got) != 1 || got[0] != "gpu-1" {
				t.Errorf("share %s got %v, want gpu-1, the card shared already", name, got)
			}
		}
	})

	t.Run("MIG device packs onto the card in MIG use", func(t *testing.T) {
		ns := "dra-mig"
		draNamespace(t, c, ns)
		// gpu-1's 3g.40gb is taken; a 1g.10gb goes to gpu-1 too, not to
		// gpu-0, the first in the slice.
		parent := deviceAttr(t, c, "mig-0", "gpu-1-mig-3g40gb-9-0", "parentUUID")
		draClaim(t, c, ns, "old", nvidiadra.MIGClass, fmt.Sprintf(
			"device.attributes['gpu.nvidia.com'].parentUUID == '%s' && device.attributes['gpu.nvidia.com'].profile == '3g.40gb'", parent), nil)
		createPods(t, c, claimPod(ns, "old", "aisched", "old", "mig-0"))
		if got := allocatedDevices(t, c, ns, "old", "old"); len(got) != 1 || got[0] != "gpu-1-mig-3g40gb-9-0" {
			t.Fatalf("the first MIG claim got %v, want gpu-1-mig-3g40gb-9-0 (its selector)", got)
		}
		draClaim(t, c, ns, "small", nvidiadra.MIGClass, "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", nil)
		createPods(t, c, claimPod(ns, "small", "aisched", "small", "mig-0"))
		if got := allocatedDevices(t, c, ns, "small", "small"); len(got) != 1 || !strings.HasPrefix(got[0], "gpu-1-mig-1g10gb-") {
			t.Errorf("the MIG claim got %v, want a 1g.10gb device of gpu-1", got)
		}
	})

	t.Run("a gang's claims solved whole, where first fit loses (kubernetes#138765)", func(t *testing.T) {
		// Each member asks for the whole card, else half of it (a 3g.40gb
		// partition): one card for two members. Claim by claim, the first
		// takes the whole card (its preferred choice) and the second finds
		// nothing; solved together, each gets half.
		for _, tc := range []struct {
			profile string
			gang    bool
		}{{"default-scheduler", false}, {"aisched", true}} {
			ns := "dra-gang-" + tc.profile
			draNamespace(t, c, ns)
			var pods []*corev1.Pod
			for i := range 2 {
				name := fmt.Sprintf("m%d", i)
				wholeOrHalf(t, c, ns, name)
				p := claimPod(ns, name, tc.profile, name, "gang-0")
				if tc.gang {
					p.Labels = map[string]string{podgroup.NameLabel: "g", podgroup.MinAvailableLabel: "2"}
				}
				pods = append(pods, p)
			}
			createPods(t, c, pods...)
			if !tc.gang {
				running, unschedulable := settle(t, c, ns, 2)
				if len(running) != 1 || len(unschedulable) != 1 {
					t.Fatalf("first fit: %d running, %d unschedulable; want 1 and 1", len(running), len(unschedulable))
				}
				if got := allocatedDevices(t, c, ns, running[0].Name, running[0].Name); len(got) != 1 || got[0] != "gpu-0" {
					t.Errorf("first fit gave the running member %v, want the whole card gpu-0", got)
				}
				// Free the card for the gang.
				for _, p := range pods {
					if err := c.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
						t.Fatal(err)
					}
					if err := c.Client.ResourceV1().ResourceClaims(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				localtest.Eventually(t, time.Minute, "the first-fit claims deallocated and gone", func(ctx context.Context) (bool, error) {
					list, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
					return err == nil && len(list.Items) == 0, err
				})
				continue
			}
			for _, p := range pods {
				if got := allocatedDevices(t, c, ns, p.Name, p.Name); len(got) != 1 || !strings.HasPrefix(got[0], "gpu-0-mig-3g40gb-") {
					t.Errorf("gang member %s got %v, want a 3g.40gb half of gpu-0", p.Name, got)
				}
			}
		}
	})

	t.Run("a claim no device can meet is refused naming the request", func(t *testing.T) {
		ns := "dra-never"
		draNamespace(t, c, ns)
		draClaim(t, c, ns, "huge", nvidiadra.GPUClass, fmt.Sprintf(memorySelector, "1Ti"), nil)
		createPods(t, c, claimPod(ns, "huge", "aisched", "huge", ""))
		localtest.Eventually(t, time.Minute, "the pod refused with the request named", func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "huge", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cond := unschedulableCondition(p)
			return cond != nil && strings.Contains(cond.Message, "claim dra-never/huge, request gpu: no device of the cluster matches gpu"),
				fmt.Errorf("conditions %+v", p.Status.Conditions)
		})
	})
}

// A DRA pod for which no node has a free device is rejected at once,
// saying so, and runs once a device is freed: the candidate list of
// GPUClaims' PreFilter must not keep it pending after the deallocation
// that requeued it, whichever of the ledger and the scheduler's DRA
// manager sees it first.
func TestDRANodesWithoutRoom(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: dra, count: 4, cpu: "16", memory: 64Gi, gpus: {count: 1, model: NVIDIA-A100-SXM4-80GB, memoryMiB: 81920, computeCapability: "8.0", dra: {}}}
`)
	checkPostFilterOrder(t, c)
	ctx := context.Background()
	ns := "dra-room"
	draNamespace(t, c, ns)
	for i := range 4 {
		name := fmt.Sprintf("held-%d", i)
		draClaim(t, c, ns, name, nvidiadra.GPUClass, "", nil)
		createPods(t, c, claimPod(ns, name, "aisched", name, ""))
		allocatedDevices(t, c, ns, name, name)
	}
	draClaim(t, c, ns, "late", nvidiadra.GPUClass, "", nil)
	createPods(t, c, claimPod(ns, "late", "aisched", "late", ""))
	const want = "no node has the free gpu.nvidia.com devices the pod's claims ask for"
	localtest.Eventually(t, time.Minute, "pod late unschedulable, saying why", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "late", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := unschedulableCondition(p)
		return cond != nil && strings.Contains(cond.Message, want), fmt.Errorf("conditions %+v", p.Status.Conditions)
	})
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "held-2", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.ResourceV1().ResourceClaims(ns).Delete(ctx, "held-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	allocatedDevices(t, c, ns, "late", "late")
}
