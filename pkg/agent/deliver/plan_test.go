package deliver

import (
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aisched/aisched/pkg/gpu"
)

func containerWith(name string, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Limits: limits, Requests: limits}}
}

func cardsLimit(n int64) corev1.ResourceList {
	return corev1.ResourceList{gpu.ResourceName: *resource.NewQuantity(n, resource.DecimalSI)}
}

func TestPlan(t *testing.T) {
	uuid := func(i int) string { return testCards[i].UUID }
	// A pod of two GPU containers, one without, and an init container:
	// the app containers take consecutive slices, the init container the
	// first cards.
	multi := gpuPod("multi", 0, assigned(2, 0, 1))
	multi.Spec.InitContainers = []corev1.Container{containerWith("init", cardsLimit(1))}
	multi.Spec.Containers = []corev1.Container{containerWith("a", cardsLimit(1)), {Name: "sidecar"}, containerWith("b", cardsLimit(2))}

	byIndex := gpuPod("by-index", 1, map[string]string{gpu.AssignedAnnotation: "1"})

	hami := gpuPod("hami", 0, assigned(2))
	hami.Spec.Containers = []corev1.Container{
		containerWith("main", corev1.ResourceList{gpu.ResourceName: resource.MustParse("1"), gpu.HAMiGPUMemResource: resource.MustParse("3000")}),
		{Name: "sidecar"},
	}
	annotated := gpuPod("annotated", 0, with(assigned(2), gpu.MilliAnnotation, "250"))
	annotated.Spec.Containers = append(annotated.Spec.Containers, corev1.Container{Name: "second"})
	// HAMi's default_use: two cards, 3000 MiB and 30% of each.
	defaultUse := gpuPod("default-use", 0, assigned(0, 2))
	defaultUse.Spec.Containers = []corev1.Container{containerWith("main", corev1.ResourceList{
		gpu.ResourceName: resource.MustParse("2"), gpu.HAMiGPUMemResource: resource.MustParse("3000"), gpu.HAMiGPUCoresResource: resource.MustParse("30"),
	})}
	percent := gpuPod("percent", 0, with(assigned(1), gpu.HAMiGPUMemPercentAnnotation, "25", gpu.AssignedGPUMemAnnotation, "8192"))

	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		container string
		want      []string
		share     *Share
		err       string
	}{
		{name: "init container takes the first cards", pod: multi, container: "init", want: []string{uuid(2)}},
		{name: "first app container", pod: multi, container: "a", want: []string{uuid(2)}},
		{name: "container without GPUs", pod: multi, container: "sidecar"},
		{name: "second app container", pod: multi, container: "b", want: []string{uuid(0), uuid(1)}},
		{name: "unknown container", pod: multi, container: "nope", err: `no container "nope"`},
		{name: "indices mapped to the node's UUIDs", pod: byIndex, container: "main", want: []string{uuid(1)}},
		{name: "HAMi form: the container that names the GPU", pod: hami, container: "main", want: []string{uuid(2)}, share: &Share{MemMiB: 3000}},
		{name: "HAMi form: not its sidecar", pod: hami, container: "sidecar"},
		{name: "annotation share: every app container", pod: annotated, container: "second", want: []string{uuid(2)}, share: &Share{Milli: 250}},
		{name: "not placed by aisched", pod: gpuPod("other", 1, nil), container: "main"},
		{name: "UUID not on the node", pod: gpuPod("stale", 1, map[string]string{gpu.AssignedAnnotation: "0", gpu.AssignedUUIDsAnnotation: "GPU-elsewhere"}), container: "main",
			err: `gpu.aisched.io/assigned-uuids: card "GPU-elsewhere" is not a card of this node`},
		{name: "index not on the node", pod: gpuPod("far", 1, map[string]string{gpu.AssignedAnnotation: "7"}), container: "main", err: "no card 7"},
		{name: "count disagrees", pod: gpuPod("short", 2, assigned(0)), container: "main", err: "names 1 cards, the pod requests 2"},
		{name: "malformed", pod: gpuPod("bad", 1, map[string]string{gpu.AssignedAnnotation: "x"}), container: "main", err: "not a list of card indices"},
		{name: "HAMi form on two cards: a share of each", pod: defaultUse, container: "main", want: []string{uuid(0), uuid(2)}, share: &Share{Milli: 300, MemMiB: 3000}},
		{name: "annotation share of two cards", pod: gpuPod("two", 0, with(assigned(0, 1), gpu.MilliAnnotation, "500", gpu.CardsAnnotation, "2")), container: "main",
			want: []string{uuid(0), uuid(1)}, share: &Share{Milli: 500}},
		{name: "share of two cards bound to one", pod: gpuPod("short-share", 0, with(assigned(1), gpu.MilliAnnotation, "500", gpu.KAINumDevicesAnnotation, "2")), container: "main",
			err: "names 1 cards for a pod that shares 2"},
		{name: "share on two cards", pod: gpuPod("two", 0, with(assigned(0, 1), gpu.MilliAnnotation, "500")), container: "main", err: "names 2 cards for a pod that shares 1"},
		{name: "share in percent: the MiB the scheduler recorded", pod: percent, container: "main", want: []string{uuid(1)}, share: &Share{MemMiB: 8192}},
		{name: "share in percent without its MiB", pod: gpuPod("no-mib", 0, with(assigned(1), gpu.HAMiGPUMemPercentAnnotation, "25")), container: "main",
			err: "gpu.aisched.io/assigned-gpumem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Plan(tc.pod, tc.container, testCards)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(d.UUIDs, ",") != strings.Join(tc.want, ",") {
				t.Errorf("UUIDs %v, want %v", d.UUIDs, tc.want)
			}
			if (d.Share == nil) != (tc.share == nil) || d.Share != nil && *d.Share != *tc.share {
				t.Errorf("share %v, want %v", d.Share, tc.share)
			}
		})
	}
}

func TestLayer(t *testing.T) {
	for _, tc := range []struct {
		layer Layer
		err   string
	}{
		{Layer{Naming: "x", Isolation: IsolationNone}, `device naming "x"`},
		{Layer{Naming: NamingEnv, Isolation: "y"}, `isolation "y"`},
		{Layer{Naming: NamingEnv, Isolation: IsolationHAMiCore, HAMiCoreLibrary: "libvgpu.so"}, "absolute host path of libvgpu.so"},
		{Layer{Naming: NamingEnv, Isolation: IsolationMPS}, "MPS pipe directory"},
	} {
		if err := tc.layer.Validate(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: got %v, want %q", tc.layer, err, tc.err)
		}
	}

	mps := Layer{Naming: NamingEnv, Isolation: IsolationMPS, MPSPipeDirectory: "/run/nvidia/mps"}
	adj := &api.ContainerAdjustment{}
	if w := mps.Adjust(Delivery{UUIDs: []string{"GPU-a"}, Share: &Share{Milli: 333, MemMiB: 5000}}, adj); w != "" {
		t.Errorf("warning with MPS: %s", w)
	}
	env := map[string]string{}
	for _, kv := range adj.Env {
		env[kv.Key] = kv.Value
	}
	for k, v := range map[string]string{
		VisibleDevicesEnv: "GPU-a", "CUDA_MPS_PIPE_DIRECTORY": "/run/nvidia/mps",
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "34", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=5000M", ShareEnv: "milli=333,memMiB=5000",
	} {
		if env[k] != v {
			t.Errorf("MPS: %s=%q, want %q", k, env[k], v)
		}
	}
	if len(adj.Mounts) != 1 || adj.Mounts[0].Destination != "/run/nvidia/mps" {
		t.Errorf("MPS mounts %v", adj.Mounts)
	}

	// A share of each of two cards: a memory limit for each, the SM limit
	// once (HAMi-core's applies it to every card); MPS one pinned limit
	// per card.
	two := Delivery{UUIDs: []string{"GPU-a", "GPU-b"}, Share: &Share{Milli: 300, MemMiB: 3000}}
	hami := Layer{Naming: NamingEnv, Isolation: IsolationHAMiCore, HAMiCoreLibrary: "/usr/local/vgpu/libvgpu.so"}
	for _, tc := range []struct {
		layer Layer
		want  map[string]string
	}{
		{hami, map[string]string{VisibleDevicesEnv: "GPU-a,GPU-b", "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m", "CUDA_DEVICE_MEMORY_LIMIT_1": "3000m",
			"CUDA_DEVICE_SM_LIMIT": "30", "LD_PRELOAD": "/usr/local/vgpu/libvgpu.so", ShareEnv: "milli=300,memMiB=3000"}},
		{mps, map[string]string{VisibleDevicesEnv: "GPU-a,GPU-b", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=3000M,1=3000M", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30"}},
	} {
		adj := &api.ContainerAdjustment{}
		if w := tc.layer.Adjust(two, adj); w != "" {
			t.Errorf("%s: warning %s", tc.layer.Isolation, w)
		}
		env := map[string]string{}
		for _, kv := range adj.Env {
			env[kv.Key] = kv.Value
		}
		for k, v := range tc.want {
			if env[k] != v {
				t.Errorf("%s, two cards: %s=%q, want %q", tc.layer.Isolation, k, env[k], v)
			}
		}
		if _, ok := env["CUDA_DEVICE_MEMORY_LIMIT_2"]; ok {
			t.Errorf("%s: a memory limit for a third card", tc.layer.Isolation)
		}
	}

	none := Layer{Naming: NamingEnv, Isolation: IsolationNone}
	if w := none.Adjust(Delivery{UUIDs: []string{"GPU-a"}}, &api.ContainerAdjustment{}); w != "" {
		t.Errorf("warning for whole cards: %s", w)
	}
	if w := none.Adjust(Delivery{UUIDs: []string{"GPU-a"}, Share: &Share{Milli: 500}}, &api.ContainerAdjustment{}); !strings.Contains(w, "not enforced") {
		t.Errorf("no warning for an unenforced share: %q", w)
	}
	if sh, err := parseShare("milli=333,memMiB=5000"); err != nil || sh != (Share{Milli: 333, MemMiB: 5000}) {
		t.Errorf("parseShare: %v %v", sh, err)
	}
	if _, err := parseShare("milli=-1"); err == nil {
		t.Error("parseShare took a negative share")
	}
}
