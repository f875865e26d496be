package deliver

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/apis/podresources"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	aischedfake "github.com/aisched/aisched/pkg/generated/clientset/versioned/fake"
	"github.com/aisched/aisched/pkg/gpu"
)

// kubeletState is what the kubelet's PodResources server reads: its pods
// and the devices its device manager gave their containers.
type kubeletState struct {
	pods    []*corev1.Pod
	devices map[string][]string // pod UID/container -> nvidia.com/gpu device IDs
}

func (k *kubeletState) GetActivePods() []*corev1.Pod { return k.pods }
func (k *kubeletState) GetPods() []*corev1.Pod       { return k.pods }
func (k *kubeletState) GetPodByName(ns, name string) (*corev1.Pod, bool) {
	i := slices.IndexFunc(k.pods, func(p *corev1.Pod) bool { return p.Namespace == ns && p.Name == name })
	if i < 0 {
		return nil, false
	}
	return k.pods[i], true
}
func (k *kubeletState) UpdateAllocatedDevices(klog.Logger) {}
func (k *kubeletState) GetDevices(podUID, container string) []*podresourcesv1.ContainerDevices {
	ids := k.devices[podUID+"/"+container]
	if len(ids) == 0 {
		return nil
	}
	return []*podresourcesv1.ContainerDevices{{ResourceName: string(gpu.ResourceName), DeviceIds: ids}}
}
func (k *kubeletState) GetAllocatableDevices(klog.Logger) []*podresourcesv1.ContainerDevices {
	return nil
}
func (k *kubeletState) GetCPUs(*corev1.Pod, *corev1.Container) []int64 { return nil }
func (k *kubeletState) GetPodCPUs(string) []int64                      { return nil }
func (k *kubeletState) GetAllocatableCPUs() []int64                    { return nil }
func (k *kubeletState) GetMemory(klog.Logger, *corev1.Pod, *corev1.Container) []*podresourcesv1.ContainerMemory {
	return nil
}
func (k *kubeletState) GetPodMemory(klog.Logger, string) []*podresourcesv1.ContainerMemory {
	return nil
}
func (k *kubeletState) GetAllocatableMemory(klog.Logger) []*podresourcesv1.ContainerMemory {
	return nil
}
func (k *kubeletState) GetDynamicResources(klog.Logger, *corev1.Pod, *corev1.Container) []*podresourcesv1.DynamicResource {
	return nil
}

// serveKubelet serves the kubelet's own PodResources server on a socket.
func serveKubelet(t *testing.T, k *kubeletState) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, podresources.NewV1PodResourcesServer(context.Background(), podresources.PodResourcesProviders{
		Pods: k, Devices: k, Cpus: k, Memory: k, DynamicResources: k,
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return path
}

func running(p *corev1.Pod) *corev1.Pod {
	p.Spec.NodeName = "gpu-1"
	p.Status.Phase = corev1.PodRunning
	return p
}

// TestChecker: the drift between the scheduler's cards and what
// containers hold, read from the hook's holdings and from the kubelet's
// PodResources API (its own server over its socket), reaches pod events,
// the GPUInventory status and the metrics; another scheduler's pod gets
// its cards located.
func TestChecker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ok := running(gpuPod("ok", 1, assigned(0)))
	wrong := running(gpuPod("wrong", 1, assigned(1)))
	none := running(gpuPod("none", 1, assigned(2)))
	foreign := running(gpuPod("foreign", 1, nil))
	pending := gpuPod("pending", 1, assigned(1))
	pending.Spec.NodeName = "gpu-1"
	pods := []*corev1.Pod{ok, wrong, none, foreign, pending}

	kubelet := &kubeletState{pods: pods, devices: map[string][]string{
		// The device plugin's picks: the kubelet does not know the hook
		// gave ok card 0, and gave wrong card 2 where the scheduler chose 1.
		string(ok.UID) + "/main":      {testCards[1].UUID},
		string(wrong.UID) + "/main":   {testCards[2].UUID},
		string(foreign.UID) + "/main": {testCards[1].UUID},
	}}
	prClient, closer, err := DialPodResources(serveKubelet(t, kubelet))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()

	client := fake.NewClientset()
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	lister := factory.Core().V1().Pods().Lister()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	defer factory.Shutdown()
	defer cancel()

	inventories := aischedfake.NewSimpleClientset(&aischedv1alpha1.GPUInventory{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}})
	holdings := NewHoldings()
	holdings.Add("c-ok", Holding{Pod: "default/ok", PodUID: string(ok.UID), Container: "main", UUIDs: []string{testCards[0].UUID}, Delivered: true})

	var mu sync.Mutex
	var events []string
	c, err := NewChecker(CheckerOptions{
		NodeName: "gpu-1", Pods: lister, Holdings: holdings, PodResources: prClient,
		Cards:  func(context.Context) ([]gpu.Card, error) { return testCards, nil },
		Client: client, Inventories: inventories,
		Recorder: func(pod *corev1.Pod, _, reason, msg string) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, pod.Name+" "+reason+": "+msg)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	k8smetrics.NewKubeRegistry().MustRegister(c.Metrics()...)

	if err := c.Once(ctx); err != nil {
		t.Fatal(err)
	}
	wantEvents := []string{
		"wrong GPUDrift: its containers hold cards [" + testCards[2].UUID + "]; the scheduler assigned [" + testCards[1].UUID + "]",
		"none GPUDrift: its containers hold cards []; the scheduler assigned [" + testCards[2].UUID + "]",
	}
	slices.Sort(events)
	slices.Sort(wantEvents)
	if !slices.Equal(events, wantEvents) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(wantEvents, "\n"))
	}
	inv, err := inventories.AischedV1alpha1().GPUInventories().Get(ctx, "gpu-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, d := range inv.Status.Drift {
		listed = append(listed, d.Pod)
	}
	if inv.Status.DriftCount != 2 || !slices.Equal(listed, []string{"default/none", "default/wrong"}) || inv.Status.CheckTime == nil {
		t.Errorf("GPUInventory status %+v", inv.Status)
	}
	for gauge, want := range map[string]float64{"drift": 2, "located": 1} {
		g := c.driftPods
		if gauge == "located" {
			g = c.locatedPods
		}
		if got, err := testutil.GetGaugeMetricValue(g.GaugeMetric); err != nil || got != want {
			t.Errorf("%s pods gauge %v (%v), want %v", gauge, got, err, want)
		}
	}
	got, err := client.CoreV1().Pods("default").Get(ctx, "foreign", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[gpu.LocatedAnnotation] != "1" {
		t.Errorf("another scheduler's pod: %s=%q, want 1", gpu.LocatedAnnotation, got.Annotations[gpu.LocatedAnnotation])
	}

	// The same drift again: no new events, no new write.
	writes := len(inventories.Actions())
	events = nil
	if err := c.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if len(events) != 0 || len(inventories.Actions()) != writes {
		t.Errorf("a second check of the same drift: events %v, %d more requests", events, len(inventories.Actions())-writes)
	}
}
