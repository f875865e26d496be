package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	platformv1alpha1 "github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	typedplatform "github.com/aisched/aisched/pkg/generated/clientset/versioned/typed/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// inferBody is an Open Inference Protocol v2 request for the demo model,
// which answers the sum of its inputs: 10.
const inferBody = `{"inputs":[{"name":"x","shape":[4],"datatype":"FP64","data":[1,2,3,4]}]}`

// platformEnv is a local cluster with the service platform, and a
// namespace to work in.
type platformEnv struct {
	t       *testing.T
	c       *local.Cluster
	api     typedplatform.PlatformV1alpha1Interface
	ns      string
	gateway string
	http    *http.Client
}

func startPlatform(t *testing.T) *platformEnv {
	t.Helper()
	return startPlatformWith(t, local.Options{Platform: &local.PlatformOptions{}})
}

// startPlatformWith is startPlatform with the cluster's options (they must
// turn the platform on).
func startPlatformWith(t *testing.T, opts local.Options) *platformEnv {
	t.Helper()
	c := localtest.Start(t, opts)
	e := &platformEnv{
		t: t, c: c, api: versioned.NewForConfigOrDie(c.Config).PlatformV1alpha1(),
		ns: createNamespace(t, c.Client), gateway: c.GatewayURL(),
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}},
	}
	return e
}

func (e *platformEnv) createOperator(o *platformv1alpha1.Operator) {
	e.t.Helper()
	if _, err := e.api.Operators(e.ns).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create operator %s: %v", o.Name, err)
	}
}

func (e *platformEnv) createInstance(i *platformv1alpha1.OperatorInstance) {
	e.t.Helper()
	if _, err := e.api.OperatorInstances(e.ns).Create(context.Background(), i, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create instance %s: %v", i.Name, err)
	}
}

func (e *platformEnv) createService(s *platformv1alpha1.AIService) {
	e.t.Helper()
	if _, err := e.api.AIServices(e.ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create service %s: %v", s.Name, err)
	}
}

// waitService waits until the AIService's Ready condition has the reason
// and the status ok says so.
func (e *platformEnv) waitService(name string, ok func(*platformv1alpha1.AIService) bool, what string) *platformv1alpha1.AIService {
	e.t.Helper()
	var got *platformv1alpha1.AIService
	localtest.Eventually(e.t, time.Minute, fmt.Sprintf("AIService %s: %s", name, what), func(ctx context.Context) (bool, error) {
		s, err := e.api.AIServices(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = s
		return ok(s), fmt.Errorf("status %+v", s.Status)
	})
	return got
}

func serviceReady(endpoints int32) func(*platformv1alpha1.AIService) bool {
	return func(s *platformv1alpha1.AIService) bool {
		return meta.IsStatusConditionTrue(s.Status.Conditions, platformv1alpha1.ConditionReady) && s.Status.ReadyEndpoints == endpoints
	}
}

func serviceReason(reason string) func(*platformv1alpha1.AIService) bool {
	return func(s *platformv1alpha1.AIService) bool {
		c := meta.FindStatusCondition(s.Status.Conditions, platformv1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason && c.ObservedGeneration == s.Generation
	}
}

// response is an answer of the gateway.
type response struct {
	code   int
	header http.Header
	body   string
}

// do sends a request through the gateway to path under the service.
func (e *platformEnv) do(method, service, path, body string, header map[string]string) response {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.gateway+"/"+e.ns+"/"+service+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

// infer sends the example inference request to the model "demo".
func (e *platformEnv) infer(service string, header map[string]string) response {
	e.t.Helper()
	return e.do(http.MethodPost, service, "/v2/models/demo/infer", inferBody, header)
}

// wantSum checks that an answer is the demo model's sum of inferBody.
func wantSum(t *testing.T, r response) {
	t.Helper()
	if r.code != http.StatusOK {
		t.Fatalf("inference: %d %s, want 200", r.code, r.body)
	}
	var out struct {
		ModelName string `json:"model_name"`
		Outputs   []struct {
			Name string    `json:"name"`
			Data []float64 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(r.body), &out); err != nil {
		t.Fatalf("inference answer %q: %v", r.body, err)
	}
	if out.ModelName != "demo" || len(out.Outputs) != 1 || len(out.Outputs[0].Data) != 1 || out.Outputs[0].Data[0] != 10 {
		t.Fatalf("inference answer %s, want model demo's sum 10", r.body)
	}
}

// TestPlatform takes an Operator to an answer through the gateway, scales
// its instance to 3 replicas with the scale subresource (as kubectl scale
// and an HPA do) and sees requests spread over the 3, then takes the
// instance offline: its pods go, their GPUs are free, the object stays,
// and the service answers 503 with the reason.
func TestPlatform(t *testing.T) {
	t.Parallel()
	e := startPlatform(t)
	ctx := context.Background()
	e.createOperator(utiltesting.MakeOperator("demo", e.ns).GPUs(1).Obj())
	e.createInstance(utiltesting.MakeInstance("demo", e.ns, "demo").Obj())
	e.createService(utiltesting.MakeService("demo", e.ns, "demo").Obj())
	svc := e.waitService("demo", serviceReady(1), "ready with 1 endpoint")
	if want := e.gateway + "/" + e.ns + "/demo/"; svc.Status.URL != want {
		t.Errorf("status.url = %q, want %q", svc.Status.URL, want)
	}
	if svc.Status.NodePort < 30000 || svc.Status.NodePort > 32767 {
		t.Errorf("status.nodePort = %d, want one of the node port range", svc.Status.NodePort)
	}
	s, err := e.c.Client.CoreV1().Services(e.ns).Get(ctx, "demo", metav1.GetOptions{})
	if err != nil || s.Spec.Type != corev1.ServiceTypeNodePort || !metav1.IsControlledBy(s, svc) {
		t.Errorf("Service demo: %v %+v, want a NodePort Service owned by the AIService", err, s)
	}
	wantSum(t, e.infer("demo", nil))

	// Scale to 3 through the scale subresource. The controller writes the
	// instance's status meanwhile, so a write may meet a newer version.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := e.api.OperatorInstances(e.ns).GetScale(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if scale.Spec.Replicas != 1 || scale.Status.Selector != platformv1alpha1.InstanceLabel+"=demo" {
			t.Errorf("scale %+v, want 1 replica and selector %s=demo", scale, platformv1alpha1.InstanceLabel)
		}
		_, err = e.api.OperatorInstances(e.ns).UpdateScale(ctx, "demo", &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: e.ns, ResourceVersion: scale.ResourceVersion},
			Spec:       autoscalingv1.ScaleSpec{Replicas: 3},
		}, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e.waitService("demo", serviceReady(3), "ready with 3 endpoints")
	pods := map[string]int{}
	for range 30 {
		r := e.infer("demo", nil)
		wantSum(t, r)
		pods[r.header.Get("X-Aisched-Pod")]++
	}
	if len(pods) != 3 {
		t.Errorf("30 requests answered by %v, want 3 pods", pods)
	}
	for pod, n := range pods {
		if n != 10 {
			t.Errorf("pod %s answered %d of 30 requests, want 10 (round robin)", pod, n)
		}
	}
	inst, err := e.api.OperatorInstances(e.ns).Get(ctx, "demo", metav1.GetOptions{})
	if err != nil || inst.Status.ReadyReplicas != 3 || !meta.IsStatusConditionTrue(inst.Status.Conditions, platformv1alpha1.ConditionReady) {
		t.Errorf("instance status %+v (%v), want 3 ready replicas and Ready", inst.Status, err)
	}
	running, err := e.c.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gpus := gpusHeld(running.Items); gpus != 3 {
		t.Errorf("%d GPUs held by the instance's pods, want 3", gpus)
	}

	// Offline: the pods go, the object stays, the service says why.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		inst, err := e.api.OperatorInstances(e.ns).Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		inst.Spec.State = platformv1alpha1.Offline
		_, err = e.api.OperatorInstances(e.ns).Update(ctx, inst, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	localtest.Eventually(t, time.Minute, "the offline instance's pods gone", func(ctx context.Context) (bool, error) {
		pods, err := e.c.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, fmt.Errorf("%d pods, %w", len(pods.Items), err)
	})
	e.waitService("demo", serviceReason(platformv1alpha1.ReasonInstanceOffline), "InstanceOffline")
	localtest.Eventually(t, 5*time.Second, "the gateway answers 503 with the reason", func(context.Context) (bool, error) {
		r := e.infer("demo", nil)
		return r.code == http.StatusServiceUnavailable && strings.Contains(r.body, "offline"), fmt.Errorf("%d %s", r.code, r.body)
	})
	if _, err := e.api.OperatorInstances(e.ns).Get(ctx, "demo", metav1.GetOptions{}); err != nil {
		t.Errorf("the offline instance: %v, want it kept", err)
	}
}
