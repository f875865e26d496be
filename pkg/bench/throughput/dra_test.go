package throughput

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	"github.com/aisched/aisched/pkg/local/nodesim"
)

// --dra without GPU nodes, with shared pods or with fill pods is refused
// before any cluster starts, naming the flags.
func TestDRABounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"CPU nodes", Options{DRA: true}, "--dra publishes the cards of GPU nodes through NVIDIA's DRA driver: give --gpu too"},
		{"shared", Options{DRA: true, GPU: true, Shared: true}, "--dra with --shared"},
		{"fill", Options{DRA: true, GPU: true, Fill: 0.5}, "--fill 0.5 with --dra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Nodes, opts.Pods, opts.Profiles = 10, 10, []string{"default-scheduler"}
			_, err := Run(context.Background(), opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := checkDRA(Options{DRA: true, GPU: true, Nodes: 500, Pods: 2000}); err != nil {
		t.Errorf("whole-GPU DRA pods: %v, want them accepted", err)
	}
}

// With DRA the bench's nodes publish their 8 cards as 8 whole devices of
// NVIDIA's driver, and no nvidia.com/gpu; without, the device plugin's
// cards and no slices.
func TestDRACluster(t *testing.T) {
	for _, dra := range []bool{false, true} {
		c := benchCluster(Options{Nodes: 2, GPU: true, DRA: dra})
		if g := c.NodePools[0].GPUs; (g.DRA != nil) != dra || dra && (g.DRA.ConsumableShares != "" || len(g.DRA.MIG) > 0 || g.DRA.DynamicMIG) {
			t.Errorf("dra %v: the pool's DRA %+v, want the driver's defaults (no sharing, no MIG) only with DRA", dra, g.DRA)
		}
		nodes := nodesim.Nodes(c)
		if len(nodes) != 2 {
			t.Fatalf("dra %v: %d nodes, want 2", dra, len(nodes))
		}
		for _, n := range nodes {
			devices := 0
			for _, sl := range n.Slices {
				if sl.Spec.Driver != nvidiadra.Driver || ptr.Deref(sl.Spec.NodeName, "") != n.Object.Name {
					t.Errorf("node %s publishes slice %s of driver %s for node %v", n.Object.Name, sl.Name, sl.Spec.Driver, sl.Spec.NodeName)
				}
				for _, d := range sl.Spec.Devices {
					devices++
					if ptr.Deref(d.AllowMultipleAllocations, false) {
						t.Errorf("node %s: device %s may be shared, want it whole", n.Object.Name, d.Name)
					}
				}
			}
			_, plugin := n.Object.Status.Allocatable[gpu.ResourceName]
			switch {
			case dra && (devices != 8 || plugin):
				t.Errorf("DRA node %s: %d devices, nvidia.com/gpu %v; want 8 devices and no nvidia.com/gpu", n.Object.Name, devices, plugin)
			case !dra && (devices != 0 || !plugin):
				t.Errorf("node %s: %d devices, nvidia.com/gpu %v; want no devices and nvidia.com/gpu", n.Object.Name, devices, plugin)
			}
		}
	}
}

// With DRA each pod gets a claim of its own, named after it, for one
// device of the driver's GPU class, and uses it; without, the pod is as
// built and no claim is created.
func TestClaimPod(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	bc := benchCase{profile: "aisched"}
	plain := benchPod(0, benchNamespace, bc, false, nil, nil, nil)
	if err := claimPod(ctx, client, Options{GPU: true}, plain); err != nil || len(plain.Spec.ResourceClaims) != 0 {
		t.Errorf("without DRA: %v, claims %v; want none", err, plain.Spec.ResourceClaims)
	}
	pod := benchPod(1, benchNamespace, bc, false, nil, nil, nil)
	if err := claimPod(ctx, client, Options{GPU: true, DRA: true}, pod); err != nil {
		t.Fatal(err)
	}
	claims, err := client.ResourceV1().ResourceClaims(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 1 {
		t.Fatalf("%d claims, want the one of pod %s", len(claims.Items), pod.Name)
	}
	c := claims.Items[0]
	r := c.Spec.Devices.Requests[0].Exactly
	if c.Name != pod.Name || r.DeviceClassName != nvidiadra.GPUClass || r.Count != 1 || r.Capacity != nil {
		t.Errorf("claim %s: class %s, %d devices, capacity %v; want %s, one of class %s, whole", c.Name, r.DeviceClassName, r.Count, r.Capacity, pod.Name, nvidiadra.GPUClass)
	}
	if got := pod.Spec.ResourceClaims; len(got) != 1 || ptr.Deref(got[0].ResourceClaimName, "") != pod.Name || len(pod.Spec.Containers[0].Resources.Claims) != 1 {
		t.Errorf("pod claims %+v, container claims %v; want the pod's claim used", got, pod.Spec.Containers[0].Resources.Claims)
	}
	if err := claimPod(ctx, client, Options{GPU: true, DRA: true}, benchPod(1, benchNamespace, bc, false, nil, nil, nil)); err == nil || !strings.Contains(err.Error(), "claim of pod pod-00001") {
		t.Errorf("a claim created twice: %v, want an error naming the pod", err)
	}
}

// The check after a DRA run: every measured pod bound with one device of
// its node, none given twice.
func TestCheckClaims(t *testing.T) {
	// podOn is measured pod i bound to node with its claim given device.
	podOn := func(i int, node, device string) (*corev1.Pod, *resourceapi.ResourceClaim) {
		pod := benchPod(i, benchNamespace, benchCase{profile: "aisched"}, false, nil, nil, nil)
		pod.UID = types.UID(pod.Name)
		pod.Spec.NodeName = node
		claim := nvidiadra.Claim(benchNamespace, pod.Name, nvidiadra.ClaimRequest{Count: 1})
		nvidiadra.UseClaim(pod, claim.Name)
		claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
		if device != "" {
			claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: nvidiadra.ClaimName, Driver: nvidiadra.Driver, Pool: node, Device: device}}}}
		}
		return pod, claim
	}
	for _, tc := range []struct {
		name    string
		devices []string // node/device of pod i; "" for pod i unbound, "node/" for its claim not allocated
		wantErr string
	}{
		{"each its own, on two nodes", []string{"node-0/gpu-0", "node-0/gpu-1", "node-1/gpu-0"}, ""},
		{"a device twice", []string{"node-0/gpu-0", "node-1/gpu-0", "node-0/gpu-0"}, "device node-0/gpu-0: given twice"},
		{"a pod unbound", []string{"node-0/gpu-0", ""}, "pod pod-00001: not bound with a claim"},
		{"a claim not allocated", []string{"node-0/gpu-0", "node-1/"}, "pod pod-00001 is bound without its claim bench/pod-00001 allocated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			for i, d := range tc.devices {
				node, device, _ := strings.Cut(d, "/")
				pod, claim := podOn(i, node, device)
				if _, err := client.CoreV1().Pods(benchNamespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, err := client.ResourceV1().ResourceClaims(benchNamespace).Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			nodes, err := checkClaims(context.Background(), client, Options{DRA: true, Pods: len(tc.devices)})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("checkClaims: %v", err)
			case tc.wantErr == "" && nodes != 2:
				t.Errorf("checkClaims: the pods on %d nodes, want 2", nodes)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("checkClaims: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	// A pod of the run missing is an error too.
	if _, err := checkClaims(context.Background(), fake.NewClientset(), Options{DRA: true, Pods: 2}); err == nil || !strings.Contains(err.Error(), "2 of the 2 pods are gone") {
		t.Errorf("checkClaims without the pods: %v", err)
	}
}

// A DRA case's child process gets --dra; others do not.
func TestInChildDRA(t *testing.T) {
	echo := InChild("sh", "-c", `printf '{"name":"%s"}' "$*"`, "sh")
	for _, dra := range []bool{false, true} {
		r, err := echo(context.Background(), Options{Nodes: 500, Pods: 2000, GPU: true, DRA: dra}, "aisched")
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(strings.Fields(r.Name), "--dra"); got != dra {
			t.Errorf("DRA %v: the child's arguments %q, --dra given %v", dra, r.Name, got)
		}
	}
}
