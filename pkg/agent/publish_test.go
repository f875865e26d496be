package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/agent/nvidiasmi"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned/fake"
)

func TestPercent(t *testing.T) {
	tests := []struct {
		name string
		in   *float64
		want *int32
	}{
		{name: "unknown stays absent", in: nil, want: nil},
		{name: "idle", in: ptr.To(0.0), want: ptr.To[int32](0)},
		{name: "rounds down", in: ptr.To(0.004), want: ptr.To[int32](0)},
		// math.Round rounds halves away from zero.
		{name: "rounds half up", in: ptr.To(0.125), want: ptr.To[int32](13)},
		{name: "rounds up", in: ptr.To(0.996), want: ptr.To[int32](100)},
		{name: "full", in: ptr.To(1.0), want: ptr.To[int32](100)},
		{name: "clamped above", in: ptr.To(1.7), want: ptr.To[int32](100)},
		{name: "clamped below", in: ptr.To(-0.2), want: ptr.To[int32](0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, percent(tc.in)); diff != "" {
				t.Errorf("percent (-want,+got):\n%s", diff)
			}
		})
	}
}

// t4x2 is what nvidia-smi prints for two T4 cards, the second of which does
// not report its utilisation.
const t4x2 = `0, GPU-5e8d1a7c-02f4-9b3e-6c1d-a48f7e20b9d6, Tesla T4, 15360, 3, 37, 1590, 7.5
1, GPU-b2c79f04-e6a1-5d83-1f9c-07e3a6d4c8b2, Tesla T4, 15360, 11204, [N/A], 1590, 7.5
`

// fakeNvidiaSMI makes a shell script the only nvidia-smi on PATH for the
// rest of the test; an empty script leaves PATH without nvidia-smi.
func fakeNvidiaSMI(t *testing.T, script string) {
	t.Helper()
	dir := t.TempDir()
	if script != "" {
		if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
}

// inventoryOf is the GPUInventory of node n1 with the cards nvidia-smi
// prints as out.
func inventoryOf(t *testing.T, out string) *aischedv1alpha1.GPUInventory {
	t.Helper()
	cards, err := nvidiasmi.Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	inv := &aischedv1alpha1.GPUInventory{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, c := range cards {
		inv.Spec.GPUs = append(inv.Spec.GPUs, c.Inventory())
	}
	return inv
}

// TestGPUInventory runs the agent with a fake nvidia-smi on PATH, or none,
// next to an existing GPUInventory or none.
func TestGPUInventory(t *testing.T) {
	t4 := inventoryOf(t, t4x2)
	oneT4 := inventoryOf(t, "0, GPU-5e8d1a7c-02f4-9b3e-6c1d-a48f7e20b9d6, Tesla T4, 15360, 3, 37, 1590, 7.5\n")
	// handWritten is an inventory that someone else wrote for a node
	// without nvidia-smi.
	handWritten := &aischedv1alpha1.GPUInventory{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec:       aischedv1alpha1.GPUInventorySpec{GPUs: []aischedv1alpha1.GPU{{Index: 0, Model: "NVIDIA-A100-SXM4-40GB", MemoryMiB: 40960}}},
	}
	t4Metrics := []aischedv1alpha1.GPUMetrics{{Index: 0, Utilization: ptr.To[int32](37), MemoryUsedMiB: 3}, {Index: 1, MemoryUsedMiB: 11204}}
	tests := []struct {
		name string
		// script is the fake nvidia-smi; none when empty.
		script   string
		existing *aischedv1alpha1.GPUInventory
		// wantRequests are the requests for GPUInventories of the first
		// sample; the second sample makes none.
		wantRequests  []string
		wantInventory *aischedv1alpha1.GPUInventory
		wantGPUs      []aischedv1alpha1.GPUMetrics
		wantErrors    float64
	}{
		{
			name:          "cards and no inventory",
			script:        "printf '%s' '" + t4x2 + "'",
			wantRequests:  []string{"get gpuinventories", "create gpuinventories"},
			wantInventory: t4,
			wantGPUs:      t4Metrics,
		},
		{
			name:          "inventory up to date",
			script:        "printf '%s' '" + t4x2 + "'",
			existing:      t4,
			wantRequests:  []string{"get gpuinventories"},
			wantInventory: t4,
			wantGPUs:      t4Metrics,
		},
		{
			name:          "a card more than the inventory",
			script:        "printf '%s' '" + t4x2 + "'",
			existing:      oneT4,
			wantRequests:  []string{"get gpuinventories", "update gpuinventories"},
			wantInventory: t4,
			wantGPUs:      t4Metrics,
		},
		{
			name:          "no nvidia-smi: someone else's inventory stays",
			existing:      handWritten,
			wantInventory: handWritten,
		},
		{
			name:          "no nvidia-smi and no inventory",
			wantInventory: nil,
		},
		{
			name:          "nvidia-smi fails: the inventory stays",
			script:        "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"; exit 9",
			existing:      t4,
			wantInventory: t4,
			wantErrors:    2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fakeNvidiaSMI(t, tc.script)
			var objects []runtime.Object
			if tc.existing != nil {
				objects = append(objects, tc.existing.DeepCopy())
			}
			client := fake.NewSimpleClientset(objects...)
			a, clk := newTestAgent(t, func(o *Options) {
				o.Client = client
				o.GPUs = nil
			})
			var gotRequests []string
			for range 2 {
				if err := once(t, a, clk); err != nil {
					t.Fatal(err)
				}
				for _, r := range actions(client) {
					if r != "get nodemetrics" && r != "create nodemetrics" && r != "update nodemetrics/status" {
						gotRequests = append(gotRequests, r)
					}
				}
				client.ClearActions()
			}
			if diff := cmp.Diff(tc.wantRequests, gotRequests); diff != "" {
				t.Errorf("requests for GPUInventories (-want,+got):\n%s", diff)
			}

			inv, err := client.AischedV1alpha1().GPUInventories().Get(context.Background(), "n1", metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				inv = nil
			case err != nil:
				t.Fatal(err)
			}
			var wantSpec, gotSpec *aischedv1alpha1.GPUInventorySpec
			if tc.wantInventory != nil {
				wantSpec = &tc.wantInventory.Spec
			}
			if inv != nil {
				gotSpec = &inv.Spec
			}
			if diff := cmp.Diff(wantSpec, gotSpec); diff != "" {
				t.Errorf("GPUInventory spec (-want,+got):\n%s", diff)
			}

			nm, err := client.AischedV1alpha1().NodeMetrics().Get(context.Background(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantGPUs, nm.Status.GPUs); diff != "" {
				t.Errorf("status.gpus (-want,+got):\n%s", diff)
			}
			if got, err := testutil.GetCounterMetricValue(a.metrics.collectorErrors.WithLabelValues(sourceNvidiaSMI)); err != nil || got != tc.wantErrors {
				t.Errorf("collector_errors_total{source=nvidia_smi} = %v (%v), want %v", got, err, tc.wantErrors)
			}
		})
	}
}

// TestGPUInventoryUnderDRA: while the node's GPUs are published as
// ResourceSlices of the DRA driver, the agent withdraws its GPUInventory and
// publishes none; once they are gone, it publishes again.
func TestGPUInventoryUnderDRA(t *testing.T) {
	fakeNvidiaSMI(t, "printf '%s' '"+t4x2+"'")
	client := fake.NewSimpleClientset(inventoryOf(t, t4x2))
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "n1-gpus"},
		Spec:       resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: ptr.To("n1"), Pool: resourcev1.ResourcePool{Name: "n1", ResourceSliceCount: 1}},
	}
	// Another node's slice and another driver's do not count.
	other := slice.DeepCopy()
	other.Name, other.Spec.NodeName = "n2-gpus", ptr.To("n2")
	nics := slice.DeepCopy()
	nics.Name, nics.Spec.Driver = "n1-nics", "nic.example.com"
	kube := kubefake.NewClientset(other, nics)
	a, clk := newTestAgent(t, func(o *Options) {
		o.Client = client
		o.KubeClient = kube
		o.GPUs = nil
		o.DRADriver = "gpu.nvidia.com"
	})
	published := func() bool {
		_, err := client.AischedV1alpha1().GPUInventories().Get(context.Background(), "n1", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if err := once(t, a, clk); err != nil || !published() {
		t.Fatalf("without DRA slices of the node: %v, inventory published %v", err, published())
	}
	if _, err := kube.ResourceV1().ResourceSlices().Create(context.Background(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := once(t, a, clk); err != nil || published() {
		t.Fatalf("with the driver's slice of the node: %v, inventory published %v", err, published())
	}
	if err := kube.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := once(t, a, clk); err != nil || !published() {
		t.Fatalf("once the slice is gone: %v, inventory published %v", err, published())
	}
}

// TestCreateWithoutCRD checks that a create refused with NotFound, what an
// apiserver without aisched's CRDs answers, says what is missing.
func TestCreateWithoutCRD(t *testing.T) {
	client := fake.NewSimpleClientset()
	client.PrependReactor("create", "nodemetrics", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(aischedv1alpha1.Resource("nodemetrics"), "")
	})
	a, clk := newTestAgent(t, func(o *Options) { o.Client = client })
	err := once(t, a, clk)
	want := `creating NodeMetrics n1: nodemetrics.aisched.io "" not found (are aisched's CRDs installed? helm install the chart charts/aisched, or run aisched crds)`
	if err == nil || err.Error() != want {
		t.Errorf("Once: %v, want %q", err, want)
	}
}
