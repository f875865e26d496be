package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	platformv1alpha1 "github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/local/modelserver"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// TestGatewayControls sends requests through the gateway of a local
// cluster to AIServices that each have one control, and checks the answer
// of each: the status, the reason the gateway gives, and whether the model
// answered (its pod header).
func TestGatewayControls(t *testing.T) {
	t.Parallel()
	e := startPlatform(t)
	ctx := context.Background()
	e.createOperator(utiltesting.MakeOperator("demo", e.ns).Obj())
	e.createInstance(utiltesting.MakeInstance("model", e.ns, "demo").Obj())
	e.createInstance(utiltesting.MakeInstance("slow", e.ns, "demo").PodAnnotation(modelserver.DelayAnnotation, "1s").Obj())
	e.createKeys("keys", map[string]string{"alice": "key-alice", "bob": "key-bob"})

	svc := func(name string) *utiltesting.ServiceWrapper { return utiltesting.MakeService(name, e.ns, "model") }
	services := []*utiltesting.ServiceWrapper{
		svc("open"),
		svc("deny-ip").Access(platformv1alpha1.AccessControl{DenyCIDRs: []string{"127.0.0.0/8"}}),
		svc("allow-other-ip").Access(platformv1alpha1.AccessControl{AllowCIDRs: []string{"10.0.0.0/8", "192.0.2.7"}}),
		svc("allow-ip").Access(platformv1alpha1.AccessControl{AllowCIDRs: []string{"127.0.0.1"}}),
		svc("keyed").APIKeys("keys").Access(platformv1alpha1.AccessControl{DenyConsumers: []string{"bob"}}),
		svc("post-only").Request(platformv1alpha1.RequestControl{Methods: []string{"POST"}}),
		svc("infer-only").Request(platformv1alpha1.RequestControl{Paths: []string{"/v2/models/*/infer"}}),
		svc("small").Request(platformv1alpha1.RequestControl{MaxBodyBytes: ptr.To[int64](66)}), // the small body below is 66 bytes
		svc("traced").Request(platformv1alpha1.RequestControl{RequiredHeaders: []string{"X-Request-ID"}}),
		svc("killed").KillSwitch("maintenance until 18:00"),
		utiltesting.MakeService("timeout", e.ns, "slow").Request(platformv1alpha1.RequestControl{TimeoutMilliseconds: 200}),
		svc("limited").RateLimit(platformv1alpha1.RateLimit{QPS: ptr.To[int32](50)}),
		svc("one-at-a-time").RateLimit(platformv1alpha1.RateLimit{MaxConcurrency: ptr.To[int32](1)}),
	}
	for _, s := range services {
		e.createService(s.Obj())
	}
	for _, s := range services {
		if s.Spec.KillSwitch != nil {
			e.waitService(s.Name, serviceReason(platformv1alpha1.ReasonKillSwitch), "KillSwitch")
		} else {
			e.waitService(s.Name, serviceReady(1), "ready")
		}
	}

	tests := []struct {
		name    string
		service string
		method  string
		path    string
		body    string
		// chunked hides the body's length, so that only reading it tells its size.
		chunked bool
		header  map[string]string
		// wantCode, wantReason: the status and the gateway's reason ("" when
		// the model answers, which sets X-Aisched-Pod).
		wantCode   int
		wantReason string
		wantHeader map[string]string
		wantBody   string
	}{
		{name: "no control", service: "open", wantCode: 200},
		{name: "denied IP", service: "deny-ip", wantCode: 403, wantReason: "IPDenied", wantBody: "127.0.0.1 is on the service's deny list"},
		{name: "IP not on the allow list", service: "allow-other-ip", wantCode: 403, wantReason: "IPNotAllowed"},
		{name: "IP on the allow list", service: "allow-ip", wantCode: 200},
		{name: "missing key", service: "keyed", wantCode: 401, wantReason: "MissingAPIKey", wantHeader: map[string]string{"Www-Authenticate": `Bearer realm="aisched"`}},
		{name: "wrong key", service: "keyed", header: map[string]string{"Authorization": "Bearer key-mallory"}, wantCode: 401, wantReason: "InvalidAPIKey"},
		{name: "key as bearer token", service: "keyed", header: map[string]string{"Authorization": "Bearer key-alice"}, wantCode: 200},
		{name: "key as X-API-Key", service: "keyed", header: map[string]string{"X-API-Key": "key-alice"}, wantCode: 200},
		{name: "denied consumer", service: "keyed", header: map[string]string{"X-API-Key": "key-bob"}, wantCode: 403, wantReason: "ConsumerDenied", wantBody: `consumer \"bob\"`},
		{name: "wrong method", service: "post-only", method: "GET", path: "/v2/models/demo", wantCode: 405, wantReason: "MethodNotAllowed", wantHeader: map[string]string{"Allow": "POST"}},
		{name: "allowed method", service: "post-only", wantCode: 200},
		{name: "path not allowed", service: "infer-only", method: "GET", path: "/v2/health/ready", wantCode: 404, wantReason: "PathNotAllowed"},
		{name: "dot segments cannot leave the allowed paths", service: "infer-only", method: "GET", path: "/v2/models/demo/infer/../../../health/ready", wantCode: 404, wantReason: "PathNotAllowed"},
		{name: "allowed path", service: "infer-only", wantCode: 200},
		{name: "body too large", service: "small", wantCode: 413, wantReason: "BodyTooLarge"},
		{name: "chunked body too large", service: "small", chunked: true, wantCode: 413, wantReason: "BodyTooLarge"},
		{name: "chunked body at the limit", service: "small", chunked: true, body: `{"inputs":[{"name":"x","shape":[1],"datatype":"FP64","data":[1]}]}`, wantCode: 200},
		{name: "body at the limit", service: "small", path: "/v2/models/demo/infer", body: `{"inputs":[{"name":"x","shape":[1],"datatype":"FP64","data":[1]}]}`, wantCode: 200},
		{name: "missing header", service: "traced", wantCode: 400, wantReason: "MissingHeader", wantBody: "X-Request-Id"},
		{name: "required header", service: "traced", header: map[string]string{"X-Request-ID": "42"}, wantCode: 200},
		{name: "kill switch", service: "killed", wantCode: 503, wantReason: "KillSwitch", wantBody: "maintenance until 18:00"},
		{name: "request timeout", service: "timeout", wantCode: 504, wantReason: "UpstreamTimeout"},
		{name: "no such service", service: "nope", wantCode: 404, wantReason: "NoSuchService"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method, path, body := tc.method, tc.path, tc.body
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = "/v2/models/demo/infer"
			}
			if body == "" && method == http.MethodPost {
				body = inferBody
			}
			var r io.Reader = strings.NewReader(body)
			if tc.chunked {
				r = io.MultiReader(r) // no length: sent chunked
			}
			req, err := http.NewRequest(method, e.gateway+"/"+e.ns+"/"+tc.service+path, r)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := e.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode {
				t.Errorf("status %d, want %d (body %s)", resp.StatusCode, tc.wantCode, b)
			}
			if got := resp.Header.Get("X-Aisched-Reason"); got != tc.wantReason {
				t.Errorf("reason %q, want %q (body %s)", got, tc.wantReason, b)
			}
			if answered := resp.Header.Get("X-Aisched-Pod") != ""; answered != (tc.wantReason == "") {
				t.Errorf("model answered: %v, want %v", answered, tc.wantReason == "")
			}
			for k, v := range tc.wantHeader {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if !strings.Contains(string(b), tc.wantBody) {
				t.Errorf("body %s, want it to contain %q", b, tc.wantBody)
			}
		})
	}

	t.Run("QPS limit", func(t *testing.T) {
		// Open 200 connections first, so that the burst is not spread by
		// connection setup: the limiter sees 200 requests within
		// milliseconds and lets through its burst of 50 plus what 50/s
		// refills meanwhile.
		e.burst(200, "open")
		codes := e.burst(200, "limited")
		ok, limited := len(codes[200]), len(codes[429])
		t.Logf("200-request burst at qps 50: %d passed, %d got 429", ok, limited)
		if ok < 45 || ok > 55 || ok+limited != 200 {
			t.Errorf("%d passed and %d got 429 of 200, want 50 +/- 10%% passed and the rest 429 (all: %v)", ok, limited, keys(codes))
		}
		for _, r := range codes[429] {
			if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 1 || r.header.Get("X-Aisched-Reason") != "RateLimited" {
				t.Fatalf("429 with Retry-After %q, reason %q: want whole seconds >= 1 and RateLimited", r.header.Get("Retry-After"), r.header.Get("X-Aisched-Reason"))
			}
		}
	})

	t.Run("concurrency limit", func(t *testing.T) {
		// One request in flight at a time: of 10 at once, each takes a few
		// milliseconds, so most find the one slot taken.
		codes := e.burst(10, "one-at-a-time")
		if len(codes[200]) == 0 || len(codes[429]) == 0 || len(codes[200])+len(codes[429]) != 10 {
			t.Errorf("10 requests at once with max concurrency 1: %v, want some 200 and some 429", keys(codes))
		}
		for _, r := range codes[429] {
			if r.header.Get("X-Aisched-Reason") != "TooManyConcurrent" || r.header.Get("Retry-After") != "1" {
				t.Errorf("429 %v, want TooManyConcurrent with Retry-After 1", r.header)
			}
		}
	})

	t.Run("key rotation without restart", func(t *testing.T) {
		start := time.Now()
		e.updateKeys("keys", map[string]string{"alice": "key-alice-2", "bob": "key-bob"})
		localtest.Eventually(t, 2*time.Second, "the new key works within 2s", func(context.Context) (bool, error) {
			r := e.infer("keyed", map[string]string{"X-API-Key": "key-alice-2"})
			return r.code == 200, fmt.Errorf("%d %s", r.code, r.body)
		})
		t.Logf("key rotated in %s", time.Since(start).Round(time.Millisecond))
		if r := e.infer("keyed", map[string]string{"X-API-Key": "key-alice"}); r.code != 401 {
			t.Errorf("the old key: %d %s, want 401", r.code, r.body)
		}
	})

	t.Run("config change within 2s", func(t *testing.T) {
		start := time.Now()
		// The controller writes the service's status meanwhile.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := e.api.AIServices(e.ns).Get(ctx, "open", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.KillSwitch = &platformv1alpha1.KillSwitch{Enabled: true, Reason: "switched off by the test"}
			_, err = e.api.AIServices(e.ns).Update(ctx, s, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		localtest.Eventually(t, 2*time.Second, "the kill switch applies within 2s", func(context.Context) (bool, error) {
			r := e.infer("open", nil)
			return r.code == 503 && strings.Contains(r.body, "switched off by the test"), fmt.Errorf("%d %s", r.code, r.body)
		})
		t.Logf("kill switch applied in %s", time.Since(start).Round(time.Millisecond))
	})
}

// TestGatewayBreaker makes a service's pod fail until its circuit breaker
// opens, sees the breaker answer without calling the pod, then lets one
// probe through half-open and closes on its success.
func TestGatewayBreaker(t *testing.T) {
	t.Parallel()
	e := startPlatform(t)
	e.createOperator(utiltesting.MakeOperator("demo", e.ns).Obj())
	e.createInstance(utiltesting.MakeInstance("flaky", e.ns, "demo").Obj())
	e.createService(utiltesting.MakeService("breaker", e.ns, "flaky").CircuitBreaker(platformv1alpha1.CircuitBreaker{
		Strategy: platformv1alpha1.ErrorRatio, ThresholdPercent: 50, MinRequests: 5, WindowSeconds: 10, OpenSeconds: 2,
	}).Obj())
	e.waitService("breaker", serviceReady(1), "ready")
	wantSum(t, e.infer("breaker", nil))

	pod := e.onlyPod("flaky")
	e.annotatePod(pod, map[string]string{modelserver.FailPercentAnnotation: "100"})
	// The window holds one success; failures open it at 50% once 5 calls
	// completed, so within 5 more calls.
	var failed int
	localtest.Eventually(t, 10*time.Second, "the breaker opens", func(context.Context) (bool, error) {
		r := e.infer("breaker", nil)
		if r.code == 500 {
			failed++
		}
		return r.header.Get("X-Aisched-Reason") == "CircuitOpen", fmt.Errorf("%d %s", r.code, r.body)
	})
	if failed == 0 || failed > 5 {
		t.Errorf("the breaker opened after %d failures, want 1 to 5", failed)
	}
	for range 5 {
		r := e.infer("breaker", nil)
		if r.code != 503 || r.header.Get("X-Aisched-Reason") != "CircuitOpen" || r.header.Get("X-Aisched-Pod") != "" || r.header.Get("Retry-After") == "" {
			t.Fatalf("while open: %d %v %s, want 503 CircuitOpen with Retry-After, without calling the pod", r.code, r.header, r.body)
		}
	}
	if got := e.gatewayMetric(`aisched_gateway_breaker_state{namespace="` + e.ns + `",service="breaker"}`); got != "2" {
		t.Errorf("aisched_gateway_breaker_state = %q, want 2 (open)", got)
	}

	// The pod recovers, slowly: after openSeconds the first call is the
	// probe, and a second call meanwhile is refused.
	e.annotatePod(pod, map[string]string{modelserver.FailPercentAnnotation: "0", modelserver.DelayAnnotation: "500ms"})
	time.Sleep(2100 * time.Millisecond)
	var wg sync.WaitGroup
	results := make([]response, 2)
	for i := range results {
		wg.Go(func() {
			if i == 1 {
				time.Sleep(100 * time.Millisecond) // the probe goes first
			}
			results[i] = e.infer("breaker", nil)
		})
	}
	wg.Wait()
	wantSum(t, results[0])
	if r := results[1]; r.code != 503 || !strings.Contains(r.body, "half-open") {
		t.Errorf("a call during the probe: %d %s, want 503 half-open", r.code, r.body)
	}
	e.annotatePod(pod, map[string]string{modelserver.DelayAnnotation: "0s"})
	for range 5 {
		wantSum(t, e.infer("breaker", nil))
	}
	if got := e.gatewayMetric(`aisched_gateway_breaker_state{namespace="` + e.ns + `",service="breaker"}`); got != "0" {
		t.Errorf("aisched_gateway_breaker_state = %q, want 0 (closed)", got)
	}
}

// TestPlatformValidation creates objects with nonsense values: the
// apiserver refuses each and names the field.
func TestPlatformValidation(t *testing.T) {
	t.Parallel()
	e := startPlatform(t)
	ctx := context.Background()
	e.createOperator(utiltesting.MakeOperator("demo", e.ns).Obj())
	e.createInstance(utiltesting.MakeInstance("demo", e.ns, "demo").Obj())
	svc := func() *utiltesting.ServiceWrapper { return utiltesting.MakeService("s", e.ns, "demo") }
	tests := []struct {
		name   string
		create func() error
		// wantField is the field path the error must name.
		wantField string
	}{
		{name: "negative replicas", wantField: "spec.replicas", create: func() error {
			_, err := e.api.OperatorInstances(e.ns).Create(ctx, utiltesting.MakeInstance("i", e.ns, "demo").Replicas(-1).Obj(), metav1.CreateOptions{})
			return err
		}},
		{name: "unknown operator", wantField: "spec.operatorRef.name: Not found", create: func() error {
			_, err := e.api.OperatorInstances(e.ns).Create(ctx, utiltesting.MakeInstance("i", e.ns, "nope").Obj(), metav1.CreateOptions{})
			return err
		}},
		{name: "unknown instance", wantField: "spec.instanceRef.name: Not found", create: func() error {
			_, err := e.api.AIServices(e.ns).Create(ctx, utiltesting.MakeService("s", e.ns, "nope").Obj(), metav1.CreateOptions{})
			return err
		}},
		{name: "limit 0", wantField: "spec.rateLimit.qps", create: func() error {
			_, err := e.api.AIServices(e.ns).Create(ctx, svc().RateLimit(platformv1alpha1.RateLimit{QPS: ptr.To[int32](0)}).Obj(), metav1.CreateOptions{})
			return err
		}},
		{name: "malformed CIDR", wantField: "spec.access.denyCIDRs[0]", create: func() error {
			_, err := e.api.AIServices(e.ns).Create(ctx, svc().Access(platformv1alpha1.AccessControl{DenyCIDRs: []string{"10.0.0.300/8"}}).Obj(), metav1.CreateOptions{})
			return err
		}},
		{name: "bad path pattern", wantField: "spec.request.paths[0]", create: func() error {
			_, err := e.api.AIServices(e.ns).Create(ctx, svc().Request(platformv1alpha1.RequestControl{Paths: []string{"/v2/[a"}}).Obj(), metav1.CreateOptions{})
			return err
		}},
		{name: "per-consumer limit without keys", wantField: "spec.rateLimit.perConsumerQPS", create: func() error {
			_, err := e.api.AIServices(e.ns).Create(ctx, svc().RateLimit(platformv1alpha1.RateLimit{PerConsumerQPS: ptr.To[int32](5)}).Obj(), metav1.CreateOptions{})
			return err
		}},
		{name: "slow-call breaker without its limit", wantField: "spec.circuitBreaker.slowCallMilliseconds", create: func() error {
			_, err := e.api.AIServices(e.ns).Create(ctx, svc().CircuitBreaker(platformv1alpha1.CircuitBreaker{Strategy: platformv1alpha1.SlowCallRatio, ThresholdPercent: 50}).Obj(), metav1.CreateOptions{})
			return err
		}},
		{name: "GPU share of a whole card", wantField: "spec.gpu.milli", create: func() error {
			o := utiltesting.MakeOperator("o", e.ns).Obj()
			o.Spec.GPU = &platformv1alpha1.GPUConstraints{Milli: ptr.To[int32](1000)}
			_, err := e.api.Operators(e.ns).Create(ctx, o, metav1.CreateOptions{})
			return err
		}},
		{name: "memory share next to whole cards", wantField: "spec.gpu.memoryShareMiB", create: func() error {
			o := utiltesting.MakeOperator("o", e.ns).GPUs(1).Obj()
			o.Spec.GPU = &platformv1alpha1.GPUConstraints{MemoryShareMiB: ptr.To[int32](8000)}
			_, err := e.api.Operators(e.ns).Create(ctx, o, metav1.CreateOptions{})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.create()
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantField) {
				t.Errorf("create: %v, want Invalid naming %s", err, tc.wantField)
			}
		})
	}
}

// burst sends n inference requests to the service at once and returns the
// answers by status.
func (e *platformEnv) burst(n int, service string) map[int][]response {
	e.t.Helper()
	var mu sync.Mutex
	codes := map[int][]response{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			req, _ := http.NewRequest(http.MethodPost, e.gateway+"/"+e.ns+"/"+service+"/v2/models/demo/infer", strings.NewReader(inferBody))
			resp, err := e.http.Do(req)
			if err != nil {
				e.t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode] = append(codes[resp.StatusCode], response{code: resp.StatusCode, header: resp.Header, body: string(b)})
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return codes
}

func keys(m map[int][]response) map[int]int {
	out := map[int]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}

func (e *platformEnv) createKeys(name string, keys map[string]string) {
	e.t.Helper()
	if _, err := e.c.Client.CoreV1().Secrets(e.ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Type: platformv1alpha1.APIKeySecretType, StringData: keys,
	}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *platformEnv) updateKeys(name string, keys map[string]string) {
	e.t.Helper()
	data := map[string][]byte{}
	for k, v := range keys {
		data[k] = []byte(v)
	}
	s, err := e.c.Client.CoreV1().Secrets(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	s.Data = data
	if _, err := e.c.Client.CoreV1().Secrets(e.ns).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// onlyPod returns the one pod of the instance.
func (e *platformEnv) onlyPod(instance string) string {
	e.t.Helper()
	pods, err := e.c.Client.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: platformv1alpha1.InstanceLabel + "=" + instance})
	if err != nil || len(pods.Items) != 1 {
		e.t.Fatalf("pods of instance %s: %v (%v), want 1", instance, len(pods.Items), err)
	}
	return pods.Items[0].Name
}

// annotatePod sets annotations of a pod (the demo model's behaviour); the
// simulated kubelet hands them to the demo model as it sees the update.
func (e *platformEnv) annotatePod(pod string, annotations map[string]string) {
	e.t.Helper()
	var b strings.Builder
	b.WriteString(`{"metadata":{"annotations":{`)
	first := true
	for k, v := range annotations {
		if !first {
			b.WriteString(",")
		}
		first = false
		fmt.Fprintf(&b, "%q:%q", k, v)
	}
	b.WriteString("}}}")
	if _, err := e.c.Client.CoreV1().Pods(e.ns).Patch(context.Background(), pod, types.MergePatchType, []byte(b.String()), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// gatewayMetric returns the value of a series of the gateway's /metrics.
func (e *platformEnv) gatewayMetric(series string) string {
	e.t.Helper()
	resp, err := e.http.Get(e.c.GatewayAdminURL() + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}
