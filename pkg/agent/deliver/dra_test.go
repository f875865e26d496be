package deliver

import (
	"slices"
	"strconv"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/google/go-cmp/cmp"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"
)

// draPod is a pod that gets a GPU through a DRA claim, as aisched places
// one: its claim is allocated, and the scheduler writes no card
// assignment on it (GPUFit assigns cards only to pods that request
// nvidia.com/gpu or a share of a card).
func draPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
			Containers: []corev1.Container{{Name: "main",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}
}

// draContainer is the container of a DRA pod as the runtime hands it to
// NRI: the kubelet passes the CDI device the DRA driver prepared for the
// claim, and the runtime has applied its edits: the card's device node,
// and NVIDIA_VISIBLE_DEVICES=void, with which NVIDIA's driver keeps the
// NVIDIA runtime hook from injecting cards again.
func draContainer(claimUID string, minor int64) *api.Container {
	return &api.Container{
		Name:       "main",
		Env:        []string{"PATH=/usr/bin", VisibleDevicesEnv + "=void"},
		CDIDevices: []*api.CDIDevice{{Name: "k8s.gpu.nvidia.com/device=" + claimUID + "-gpu-" + strconv.FormatInt(minor, 10)}},
		Linux: &api.LinuxContainer{Devices: []*api.LinuxDevice{
			{Path: "/dev/nvidiactl", Type: "c", Major: 195, Minor: 255},
			{Path: "/dev/nvidia" + strconv.FormatInt(minor, 10), Type: "c", Major: 195, Minor: minor},
		}},
	}
}

// TestHookLeavesDRADevices: under DRA the driver prepares the devices. A
// container whose pod gets its GPU through a claim, or whose
// nvidia.com/gpu the scheduler backed with a claim, passes through the
// hook as the driver's CDI edits made it (the hook injects no card, no
// environment, no isolation layer, and refuses nothing), also after the
// hook's restart; a pod aisched placed on a card by the device plugin's
// path, on the same node, still gets its card.
func TestHookLeavesDRADevices(t *testing.T) {
	r := newRuntime(t)
	src := &pods{}
	// The layer that adjusts the most: HAMi-core's library and limits.
	layer := Layer{Naming: NamingEnv, Isolation: IsolationHAMiCore, HAMiCoreLibrary: "/usr/local/vgpu/libvgpu.so"}
	first, stopHook := startHook(t, r, src, layer)
	k8smetrics.NewKubeRegistry().MustRegister(first.Metrics()...)

	// unchanged fails the test unless the spec is what the runtime made
	// of the container before the hook.
	unchanged := func(when string, ctr *api.Container, spec *rspec.Spec) {
		t.Helper()
		if diff := cmp.Diff(ctr.Env, spec.Process.Env); diff != "" {
			t.Errorf("%s: the hook changed the DRA container's environment (-before,+after):\n%s", when, diff)
		}
		var devices []string
		for _, d := range spec.Linux.Devices {
			devices = append(devices, d.Path)
		}
		if want := []string{"/dev/nvidiactl", "/dev/nvidia1"}; !slices.Equal(devices, want) {
			t.Errorf("%s: the DRA container's devices are %v, want the driver's %v", when, devices, want)
		}
		if len(spec.Mounts) > 0 || spec.Annotations["test/cdi"] != "" {
			t.Errorf("%s: the hook added mounts %v or CDI devices %q to the DRA container", when, spec.Mounts, spec.Annotations["test/cdi"])
		}
	}
	createDRA := func(pod *corev1.Pod) {
		t.Helper()
		src.add(pod)
		before := draContainer("claim-"+pod.Name, 1)
		want := slices.Clone(before.Env)
		ctr, spec, err := r.createFrom(r.runPod(pod), before)
		if err != nil {
			t.Fatalf("the hook refused the DRA container of %s: %v", pod.Name, err)
		}
		ctr.Env = want
		unchanged(pod.Name, ctr, spec)
	}

	createDRA(draPod("dra"))
	// A pod that asks for nvidia.com/gpu on a node whose DRA driver's
	// device class backs it (KEP-5004): the scheduler gave it a claim
	// (status.extendedResourceClaimStatus) and the driver prepared the
	// card; a card assignment on it too is not delivered over the
	// driver's.
	extended := gpuPod("extended", 1, assigned(2))
	extended.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "extended-extended-resources-abcde",
		RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "main", ResourceName: "nvidia.com/gpu", RequestName: "container-0-request-0"}}}
	createDRA(extended)
	// Beside it, a pod aisched placed on card 0; the device plugin picked
	// card 2, and the hook gives the scheduler's choice.
	placed := gpuPod("placed", 1, assigned(0))
	src.add(placed)
	_, spec, err := r.createContainer(r.runPod(placed), "main", VisibleDevicesEnv+"="+testCards[2].UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := envOf(spec, VisibleDevicesEnv); got != testCards[0].UUID {
		t.Errorf("the placed pod: %s=%q, want card 0's %s", VisibleDevicesEnv, got, testCards[0].UUID)
	}
	// The hook counts the containers of pods aisched placed on cards: the
	// placed pod's, delivered, and the extended one's, which gets none
	// from the hook.
	for result, want := range map[string]float64{resultDelivered: 1, resultRefused: 0, resultNoGPU: 1} {
		if got, err := testutil.GetCounterMetricValue(first.containers.WithLabelValues(result)); err != nil || got != want {
			t.Errorf("gpu_containers_total{result=%q} = %v (%v), want %v", result, got, err, want)
		}
	}
	delivered := func(when string, h *Hook) {
		t.Helper()
		for _, hd := range h.Holdings().All() {
			if hd.Pod != "default/placed" && hd.Delivered {
				t.Errorf("%s: the holdings record the DRA container as the hook's delivery: %+v", when, hd)
			}
		}
	}
	delivered("first run", first)

	// The agent restarts: the running DRA container is synchronized, and
	// a new one passes as the first did.
	stopHook()
	h, _ := startHook(t, r, src, layer)
	delivered("after the hook's restart", h)
	createDRA(draPod("dra-2"))
	delivered("after the hook's restart", h)
}
