package agent

import (
	"context"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/agent/nvidiasmi"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned/fake"
	"github.com/aisched/aisched/pkg/gpu"
)

// TestStartDelivery: the delivery started for the agent watches the
// agent's node's pods only, and its checker reports a running pod of the
// node that holds none of the cards the scheduler assigned it: as an
// event of the agent on the pod, and in the agent's /metrics. Stop ends
// it. (The hook's and the checker's own behaviour are package deliver's
// tests; no runtime listens on the NRI socket here.)
func TestStartDelivery(t *testing.T) {
	const uuid = "GPU-00000000-1111-2222-3333-000000000016"
	rl := corev1.ResourceList{gpu.ResourceName: resource.MustParse("1")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "default", UID: "uid-train", Annotations: map[string]string{
			gpu.AssignedAnnotation: gpu.FormatIndices([]int{0}), gpu.AssignedUUIDsAnnotation: uuid,
		}},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Limits: rl, Requests: rl}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	kube := kubefake.NewClientset(pod)
	listed := make(chan string, 10)
	kube.PrependReactor("list", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		listed <- action.(clienttesting.ListAction).GetListRestrictions().Fields.String()
		return false, nil, nil
	})
	a, _ := newTestAgent(t, func(o *Options) {
		o.KubeClient = kube
		o.Client = fake.NewSimpleClientset(&aischedv1alpha1.GPUInventory{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
		o.GPUs = gpuReader{cards: []nvidiasmi.Card{{Index: 0, UUID: uuid, Name: "Tesla T4", MemoryTotalMiB: 15360}}}
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop, err := a.StartDelivery(ctx, DeliveryOptions{WatchClient: kube, SocketPath: filepath.Join(t.TempDir(), "nri.sock")})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()

	select {
	case selector := <-listed:
		if selector != "spec.nodeName=n1" {
			t.Errorf("the node's pods are listed with field selector %q, want spec.nodeName=n1", selector)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node's pods were not listed within 10s")
	}
	var event *corev1.Event
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(events.Items) == 0 {
			return false, err
		}
		event = &events.Items[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("no event on the pod within 10s: %v", err)
	}
	want := "its containers hold cards []; the scheduler assigned [" + uuid + "]"
	if event.InvolvedObject.Name != "train" || event.Reason != "GPUDrift" || event.Message != want ||
		event.Source.Component != "aisched-agent" || event.Source.Host != "n1" {
		t.Errorf("event on %s from %+v: %s %q, want on train from aisched-agent on n1: GPUDrift %q",
			event.InvolvedObject.Name, event.Source, event.Reason, event.Message, want)
	}

	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if !strings.Contains(string(body), "aisched_agent_gpu_drift_pods 1\n") {
		t.Errorf("/metrics has no aisched_agent_gpu_drift_pods 1:\n%s", body)
	}

	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
		stopped = true
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return within 10s")
	}
}

func TestStartDeliveryNeedsClients(t *testing.T) {
	a, _ := newTestAgent(t, nil)
	if _, err := a.StartDelivery(context.Background(), DeliveryOptions{WatchClient: kubefake.NewClientset()}); err == nil ||
		!strings.Contains(err.Error(), "Options.KubeClient are required") {
		t.Errorf("StartDelivery without a KubeClient: error %v", err)
	}
}
