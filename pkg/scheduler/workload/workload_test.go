package workload

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
)

func TestGPUWork(t *testing.T) {
	w := New()
	if w.GPUWork() {
		t.Fatal("an empty view has GPU work")
	}
	w.Observe(false)
	w.Observe(true)
	if !w.GPUWork() {
		t.Fatal("a GPU pod arrived, GPUWork is false")
	}
	// Window CPU pods push the GPU pod out.
	for range Window - 1 {
		w.Observe(false)
	}
	if !w.GPUWork() {
		t.Fatal("the GPU pod is still among the last Window pods")
	}
	w.Observe(false)
	if w.GPUWork() {
		t.Error("GPU work remembered past the window")
	}
}

// claimRequests stands for the GPU ledger: a pod asks for a card once its
// claims are named (as the ledger finds them only then).
type claimRequests struct{}

func (claimRequests) ClaimsSeen(*corev1.Pod) bool { return true }
func (claimRequests) GPUNode(fwk.NodeInfo) bool   { return false }

func (claimRequests) RequestOf(pod *corev1.Pod) (gpu.Request, error) {
	if len(pod.Status.ResourceClaimStatuses) > 0 {
		return gpu.Request{Count: 1}, nil
	}
	return gpu.Request{}, nil
}

// started is a view started on a fake clientset's informers, synced, and
// the clientset.
func started(t *testing.T, requests Requests) (*Workload, *fake.Clientset) {
	t.Helper()
	ctx := t.Context()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	w := New()
	if err := w.Start(factory, requests); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w, client
}

// TestStartClaimTemplates: a pod whose claim is made from a template is
// counted when its status names the claim, as a GPU pod, and not when it
// arrives, as a CPU pod.
func TestStartClaimTemplates(t *testing.T) {
	ctx := t.Context()
	w, client := started(t, claimRequests{})

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-x7k2p")}}
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return w.GPUWork(), nil
	}); err != nil {
		t.Fatal("the pod's named claim did not count it as GPU work")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n != 1 {
		t.Errorf("%d pods counted, want the one, once", w.n)
	}
}

// lateLedger stands for a GPU ledger whose claim handler comes after the
// pod's: a pod's claim is a GPU claim, but only once seen.
type lateLedger struct {
	mu   sync.Mutex
	seen bool
}

func (l *lateLedger) ClaimsSeen(*corev1.Pod) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen
}

func (l *lateLedger) GPUNode(fwk.NodeInfo) bool { return false }

func (l *lateLedger) RequestOf(pod *corev1.Pod) (gpu.Request, error) {
	if len(pod.Spec.ResourceClaims) > 0 && l.ClaimsSeen(pod) {
		return gpu.Request{Count: 1}, nil
	}
	return gpu.Request{}, nil
}

// TestStartClaimsSeenLate: a DRA pod that arrives before the ledger has
// seen its claim is counted, as a GPU pod, once it has; not at once, as a
// CPU pod.
func TestStartClaimsSeenLate(t *testing.T) {
	ctx := t.Context()
	ledger := &lateLedger{}
	w, client := started(t, ledger)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.deferred) == 1, nil
	}); err != nil {
		t.Fatal("the pod whose claim the ledger has not seen was not deferred")
	}
	if w.GPUWork() {
		t.Fatal("GPU work before the pod's claim was seen")
	}
	ledger.mu.Lock()
	ledger.seen = true
	ledger.mu.Unlock()
	if !w.GPUWork() {
		t.Error("the pod's claim was seen, and it is not GPU work")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n != 1 || len(w.deferred) != 0 {
		t.Errorf("%d pods counted, %d deferred; want the one counted once, none deferred", w.n, len(w.deferred))
	}
}
