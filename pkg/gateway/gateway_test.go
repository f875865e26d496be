package gateway

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
	apikeys "github.com/aisched/aisched/pkg/platform/keys"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// backend is a service's pod: it answers 200 with what it received.
func backend(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got-Path", r.URL.Path)
		w.Header().Set("X-Got-Authorization", r.Header.Get("Authorization"))
		w.Header().Set("X-Got-Api-Key", r.Header.Get("X-API-Key"))
		w.Header().Set("X-Got-Consumer", r.Header.Get("X-Aisched-Consumer"))
		w.Header().Set("X-Got-Forwarded-For", r.Header.Get("X-Forwarded-For"))
		w.Header().Set("X-Got-Body-Bytes", strconv.Itoa(len(body)))
		_, _ = io.WriteString(w, "answer")
	}))
	t.Cleanup(s.Close)
	return s
}

// testPepper is the pepper of the tests' API keys.
var testPepper = []byte("0123456789abcdef0123456789abcdef")

func secretOf(data map[string]string) *corev1.Secret {
	s := &corev1.Secret{Type: v1alpha1.APIKeySecretType, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// published returns svc with the status the controller gives it for the
// API-key Secret secret (nil: missing): the keys' digests, or the reason.
func published(svc *v1alpha1.AIService, secret *corev1.Secret) *v1alpha1.AIService {
	svc = svc.DeepCopy()
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReady}
	if secret == nil {
		cond = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonSecretNotFound, Message: "no Secret"}
	} else {
		digests, err := apikeys.Digests(testPepper, secret)
		if err != nil {
			panic(err)
		}
		svc.Status.APIKeys = digests
	}
	meta.SetStatusCondition(&svc.Status.Conditions, cond)
	return svc
}

// serve sends one request from 192.0.2.1 through a gateway with one route.
func serve(g *Gateway, method, target string, body io.Reader, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, body)
	req.RemoteAddr = "192.0.2.1:40000"
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	return rec
}

func TestControls(t *testing.T) {
	be := backend(t)
	endpoint := strings.TrimPrefix(be.URL, "http://")
	svc := func() *utiltesting.ServiceWrapper { return utiltesting.MakeService("s", "ns", "i") }
	tests := []struct {
		name     string
		svc      *v1alpha1.AIService
		secret   *corev1.Secret
		noPods   bool
		method   string
		path     string
		body     string
		header   map[string]string
		wantCode int
		// wantReason is X-Aisched-Reason, "" when the backend answered.
		wantReason string
		wantHeader map[string]string
	}{
		{name: "open", svc: svc().Obj(), wantCode: 200, wantHeader: map[string]string{"X-Got-Path": "/v2/models/m/infer"}},
		{name: "API path prefix", svc: func() *v1alpha1.AIService { s := svc().Obj(); s.Spec.Path = "/api/"; return s }(), wantCode: 200,
			wantHeader: map[string]string{"X-Got-Path": "/api/v2/models/m/infer"}},
		{name: "deny CIDR", svc: svc().Access(v1alpha1.AccessControl{DenyCIDRs: []string{"192.0.2.0/24"}}).Obj(), wantCode: 403, wantReason: ReasonIPDenied},
		{name: "deny wins over allow", svc: svc().Access(v1alpha1.AccessControl{AllowCIDRs: []string{"192.0.2.1"}, DenyCIDRs: []string{"192.0.2.1"}}).Obj(), wantCode: 403, wantReason: ReasonIPDenied},
		{name: "allow list without the caller", svc: svc().Access(v1alpha1.AccessControl{AllowCIDRs: []string{"10.0.0.0/8"}}).Obj(), wantCode: 403, wantReason: ReasonIPNotAllowed},
		{name: "allow list with the caller", svc: svc().Access(v1alpha1.AccessControl{AllowCIDRs: []string{"192.0.2.1"}}).Obj(), wantCode: 200},
		{name: "missing key", svc: svc().APIKeys("k").Obj(), secret: secretOf(map[string]string{"alice": "a1"}), wantCode: 401, wantReason: ReasonMissingAPIKey,
			wantHeader: map[string]string{"Www-Authenticate": `Bearer realm="aisched"`}},
		{name: "wrong key", svc: svc().APIKeys("k").Obj(), secret: secretOf(map[string]string{"alice": "a1"}), header: map[string]string{"X-API-Key": "a2"}, wantCode: 401, wantReason: ReasonInvalidAPIKey},
		{name: "a key's prefix is not the key", svc: svc().APIKeys("k").Obj(), secret: secretOf(map[string]string{"alice": "a1"}), header: map[string]string{"X-API-Key": "a"}, wantCode: 401, wantReason: ReasonInvalidAPIKey},
		{name: "keys Secret missing", svc: svc().APIKeys("k").Obj(), header: map[string]string{"X-API-Key": "a1"}, wantCode: 503, wantReason: ReasonUnavailable},
		{name: "key from a file, with its newline", svc: svc().APIKeys("k").Obj(), secret: secretOf(map[string]string{"alice": "a1\n"}), header: map[string]string{"Authorization": "bearer a1"}, wantCode: 200,
			// The key never reaches the service; the consumer does.
			wantHeader: map[string]string{"X-Got-Authorization": "", "X-Got-Consumer": "alice"}},
		{name: "X-API-Key is removed too", svc: svc().APIKeys("k").Obj(), secret: secretOf(map[string]string{"alice": "a1"}), header: map[string]string{"X-API-Key": "a1"}, wantCode: 200,
			wantHeader: map[string]string{"X-Got-Api-Key": "", "X-Got-Consumer": "alice"}},
		{name: "a caller cannot name the consumer", svc: svc().Obj(), header: map[string]string{"X-Aisched-Consumer": "root"}, wantCode: 200, wantHeader: map[string]string{"X-Got-Consumer": ""}},
		{name: "consumer denied", svc: svc().APIKeys("k").Access(v1alpha1.AccessControl{DenyConsumers: []string{"bob"}}).Obj(), secret: secretOf(map[string]string{"alice": "a1", "bob": "b1"}),
			header: map[string]string{"X-API-Key": "b1"}, wantCode: 403, wantReason: ReasonConsumerDenied},
		{name: "consumer not allowed", svc: svc().APIKeys("k").Access(v1alpha1.AccessControl{AllowConsumers: []string{"alice"}}).Obj(), secret: secretOf(map[string]string{"alice": "a1", "bob": "b1"}),
			header: map[string]string{"X-API-Key": "b1"}, wantCode: 403, wantReason: ReasonConsumerDenied},
		{name: "method", svc: svc().Request(v1alpha1.RequestControl{Methods: []string{"GET", "HEAD"}}).Obj(), wantCode: 405, wantReason: ReasonMethodNotAllowed,
			wantHeader: map[string]string{"Allow": "GET, HEAD"}},
		{name: "path pattern", svc: svc().Request(v1alpha1.RequestControl{Paths: []string{"/v2/health/*"}}).Obj(), wantCode: 404, wantReason: ReasonPathNotAllowed},
		{name: "dot segments are cleaned before matching", svc: svc().Request(v1alpha1.RequestControl{Paths: []string{"/v2/models/*/infer"}}).Obj(), path: "/v2/health/../models/m/infer", wantCode: 200,
			wantHeader: map[string]string{"X-Got-Path": "/v2/models/m/infer"}},
		// The path is matched and sent decoded and cleaned: an encoded
		// slash is a slash in both, so it cannot widen a * or climb.
		{name: "an encoded slash is a slash", svc: svc().Request(v1alpha1.RequestControl{Paths: []string{"/v2/models/*/infer"}}).Obj(), path: "/v2/models/a%2Fb/infer", wantCode: 404, wantReason: ReasonPathNotAllowed},
		{name: "encoded dot segments are cleaned", svc: svc().Request(v1alpha1.RequestControl{Paths: []string{"/v2/models/*/infer"}}).Obj(), path: "/v2/models/m%2F..%2F..%2Fadmin/infer", wantCode: 404, wantReason: ReasonPathNotAllowed},
		{name: "dot segments stay under the API path", svc: func() *v1alpha1.AIService { s := svc().Obj(); s.Spec.Path = "/api"; return s }(), path: "/../../etc/passwd", wantCode: 200,
			wantHeader: map[string]string{"X-Got-Path": "/api/etc/passwd"}},
		{name: "body at the limit", svc: svc().Request(v1alpha1.RequestControl{MaxBodyBytes: ptr.To[int64](5)}).Obj(), body: "12345", wantCode: 200,
			wantHeader: map[string]string{"X-Got-Body-Bytes": "5"}},
		// A body up to maxBufferedBody is read whole before the pod is
		// called, a larger one streams to it.
		{name: "body read whole", svc: svc().Obj(), body: strings.Repeat("b", maxBufferedBody), wantCode: 200,
			wantHeader: map[string]string{"X-Got-Body-Bytes": strconv.Itoa(maxBufferedBody)}},
		{name: "body streamed", svc: svc().Obj(), body: strings.Repeat("b", maxBufferedBody+1), wantCode: 200,
			wantHeader: map[string]string{"X-Got-Body-Bytes": strconv.Itoa(maxBufferedBody + 1)}},
		{name: "body one byte over", svc: svc().Request(v1alpha1.RequestControl{MaxBodyBytes: ptr.To[int64](5)}).Obj(), body: "123456", wantCode: 413, wantReason: ReasonBodyTooLarge},
		{name: "required header", svc: svc().Request(v1alpha1.RequestControl{RequiredHeaders: []string{"x-request-id"}}).Obj(), wantCode: 400, wantReason: ReasonMissingHeader},
		{name: "kill switch", svc: svc().KillSwitch("down").Obj(), wantCode: 503, wantReason: ReasonKillSwitch},
		{name: "kill switch after the IP lists", svc: svc().KillSwitch("down").Access(v1alpha1.AccessControl{DenyCIDRs: []string{"0.0.0.0/0"}}).Obj(), wantCode: 403, wantReason: ReasonIPDenied},
		{name: "no endpoint", svc: svc().Obj(), noPods: true, wantCode: 503, wantReason: ReasonUnavailable},
		{name: "broken CIDR fails closed", svc: svc().Access(v1alpha1.AccessControl{AllowCIDRs: []string{"not-an-ip"}}).Obj(), wantCode: 503, wantReason: ReasonUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := New(Options{})
			tc.svc.Namespace, tc.svc.Name = "ns", "s"
			eps := []string{endpoint}
			if tc.noPods {
				eps = nil
			}
			g.set(compile(published(tc.svc, tc.secret), testPepper, eps))
			method, path, body := tc.method, tc.path, tc.body
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = "/v2/models/m/infer"
			}
			rec := serve(g, method, "/ns/s"+path, strings.NewReader(body), tc.header)
			if rec.Code != tc.wantCode {
				t.Errorf("status %d, want %d (body %s)", rec.Code, tc.wantCode, rec.Body)
			}
			if got := rec.Header().Get("X-Aisched-Reason"); got != tc.wantReason {
				t.Errorf("reason %q, want %q (body %s)", got, tc.wantReason, rec.Body)
			}
			for k, v := range tc.wantHeader {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestSplitPath(t *testing.T) {
	tests := []struct {
		path             string
		wantNS, wantName string
		wantRest         string
		wantOK           bool
	}{
		{path: "/ns/svc/v2/models/m/infer", wantNS: "ns", wantName: "svc", wantRest: "/v2/models/m/infer", wantOK: true},
		{path: "/ns/svc", wantNS: "ns", wantName: "svc", wantRest: "/", wantOK: true},
		{path: "/ns/svc/", wantNS: "ns", wantName: "svc", wantRest: "/", wantOK: true},
		{path: "/ns/svc/a/", wantNS: "ns", wantName: "svc", wantRest: "/a/", wantOK: true},
		{path: "/ns/svc/a/../../..", wantNS: "ns", wantName: "svc", wantRest: "/", wantOK: true},
		{path: "/ns/svc//a//b", wantNS: "ns", wantName: "svc", wantRest: "/a/b", wantOK: true},
		{path: "/ns", wantOK: false},
		{path: "/ns/", wantOK: false},
		{path: "//svc/x", wantOK: false},
		{path: "", wantOK: false},
	}
	for _, tc := range tests {
		ns, name, rest, ok := splitPath(tc.path)
		if ok != tc.wantOK || ok && (ns != tc.wantNS || name != tc.wantName || rest != tc.wantRest) {
			t.Errorf("splitPath(%q) = %q %q %q %v, want %q %q %q %v", tc.path, ns, name, rest, ok, tc.wantNS, tc.wantName, tc.wantRest, tc.wantOK)
		}
	}
}

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		peer    string
		xff     []string
		want    string
	}{
		{name: "no proxies trusted: the peer, whatever it says", peer: "10.0.0.1:1", xff: []string{"1.2.3.4"}, want: "10.0.0.1"},
		{name: "untrusted peer's header is ignored", trusted: trusted, peer: "192.0.2.9:1", xff: []string{"1.2.3.4"}, want: "192.0.2.9"},
		{name: "trusted proxy", trusted: trusted, peer: "10.0.0.1:1", xff: []string{"1.2.3.4"}, want: "1.2.3.4"},
		{name: "right-most untrusted hop", trusted: trusted, peer: "10.0.0.1:1", xff: []string{"6.6.6.6, 1.2.3.4, 10.0.0.7"}, want: "1.2.3.4"},
		{name: "hops across header lines", trusted: trusted, peer: "10.0.0.1:1", xff: []string{"6.6.6.6", "1.2.3.4"}, want: "1.2.3.4"},
		{name: "malformed hop ends the chain", trusted: trusted, peer: "10.0.0.1:1", xff: []string{"1.2.3.4, garbage, 10.0.0.8"}, want: "10.0.0.8"},
		{name: "all trusted", trusted: trusted, peer: "10.0.0.1:1", xff: []string{"10.0.0.9"}, want: "10.0.0.9"},
		{name: "IPv4-mapped peer", peer: "[::ffff:192.0.2.1]:1", want: "192.0.2.1"},
		// netip.Prefix.Contains never matches an address with a zone: with
		// it, a link-local caller would pass a deny list of fe80::/10.
		{name: "zone dropped", peer: "[fe80::1%eth0]:1", want: "fe80::1"},
		{name: "zone dropped from a hop", trusted: trusted, peer: "10.0.0.1:1", xff: []string{"fe80::1%eth0"}, want: "fe80::1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := New(Options{TrustedProxies: tc.trusted})
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			if got, _ := g.clientIP(req); got.String() != tc.want {
				t.Errorf("clientIP = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestForwardedFor checks what the service is told of the caller: the
// chain from trusted proxies, from the caller the gateway found on, plus
// the peer; never a chain, or the part of one, that a caller made up.
func TestForwardedFor(t *testing.T) {
	be := backend(t)
	proxies := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		xff     []string
		want    string
	}{
		{name: "untrusted peer", xff: []string{"1.2.3.4"}, want: "192.0.2.1"},
		{name: "trusted peer", trusted: proxies, xff: []string{"1.2.3.4"}, want: "1.2.3.4, 192.0.2.1"},
		{name: "hops the caller wrote are dropped", trusted: proxies, xff: []string{"6.6.6.6, 1.2.3.4"}, want: "1.2.3.4, 192.0.2.1"},
		{name: "trusted hops are kept", trusted: proxies, xff: []string{"6.6.6.6", "1.2.3.4, 10.0.0.7"}, want: "1.2.3.4, 10.0.0.7, 192.0.2.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New(Options{TrustedProxies: tc.trusted})
			g.set(compile(utiltesting.MakeService("s", "ns", "i").Obj(), nil, []string{strings.TrimPrefix(be.URL, "http://")}))
			req := httptest.NewRequest("GET", "/ns/s/", nil)
			req.RemoteAddr = "192.0.2.1:40000"
			for _, v := range tc.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, req)
			if got := rec.Header().Get("X-Got-Forwarded-For"); got != tc.want {
				t.Errorf("X-Forwarded-For at the service: %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFlowControl takes tokens at fixed instants, so that the token
// bucket's arithmetic can be checked by hand.
func TestFlowControl(t *testing.T) {
	g := New(Options{})
	svc := utiltesting.MakeService("s", "ns", "i").APIKeys("k").RateLimit(v1alpha1.RateLimit{
		QPS: ptr.To[int32](2), Burst: ptr.To[int32](3), PerConsumerQPS: ptr.To[int32](1), PerConsumerBurst: ptr.To[int32](2),
	}).Obj()
	g.set(compile(published(svc, secretOf(map[string]string{"alice": "a", "bob": "b"})), testPepper, []string{"unused:1"}))
	rt, _ := g.routes.Load("ns/s")
	st := rt.(*route).state.Load()
	t0 := time.Unix(1000, 0)
	type step struct {
		at       time.Duration
		consumer string
		// wantReason "" admits; wantRetry is the delay before a token.
		wantReason string
		wantRetry  time.Duration
	}
	steps := []step{
		// alice's bucket holds 2: two pass, the service's bucket is at 1.
		{at: 0, consumer: "alice"},
		{at: 0, consumer: "alice"},
		// alice's third waits for her refill: 1 token per second.
		{at: 0, consumer: "alice", wantReason: ReasonConsumerRateLimited, wantRetry: time.Second},
		// bob takes the service's last token.
		{at: 0, consumer: "bob"},
		// bob's second: his bucket has 1 left, the service's is empty and
		// refills at 2/s: 500ms. The reservation on bob's bucket is undone.
		{at: 0, consumer: "bob", wantReason: ReasonRateLimited, wantRetry: 500 * time.Millisecond},
		// 500ms later the service has 1 token, bob still his 1.
		{at: 500 * time.Millisecond, consumer: "bob"},
		{at: 500 * time.Millisecond, consumer: "bob", wantReason: ReasonConsumerRateLimited, wantRetry: 500 * time.Millisecond},
	}
	for i, s := range steps {
		slot, rej := admit(st, rt.(*route), s.consumer, t0.Add(s.at))
		switch {
		case s.wantReason == "" && rej != nil:
			t.Fatalf("step %d (%s at %s): %v, want admitted", i, s.consumer, s.at, rej)
		case s.wantReason != "" && (rej == nil || rej.reason != s.wantReason || rej.retryAfter != s.wantRetry || rej.code != 429):
			t.Fatalf("step %d (%s at %s): %+v, want 429 %s retry after %s", i, s.consumer, s.at, rej, s.wantReason, s.wantRetry)
		}
		if slot {
			rt.(*route).release()
		}
	}
}

func TestConcurrencyLimit(t *testing.T) {
	g := New(Options{})
	g.set(compile(utiltesting.MakeService("s", "ns", "i").RateLimit(v1alpha1.RateLimit{MaxConcurrency: ptr.To[int32](2)}).Obj(), nil, []string{"unused:1"}))
	v, _ := g.routes.Load("ns/s")
	rt := v.(*route)
	now := time.Unix(1000, 0)
	slot1, rej1 := admit(rt.state.Load(), rt, "", now)
	slot2, rej2 := admit(rt.state.Load(), rt, "", now)
	slot3, rej3 := admit(rt.state.Load(), rt, "", now)
	if !slot1 || !slot2 || rej1 != nil || rej2 != nil || slot3 || rej3 == nil || rej3.reason != ReasonTooManyConcurrent || rej3.retryAfter != time.Second {
		t.Fatalf("3 calls with 2 slots: %v %v %+v, want 2 admitted and TooManyConcurrent with Retry-After 1s", rej1, rej2, rej3)
	}
	rt.release()
	slot4, rej4 := admit(rt.state.Load(), rt, "", now)
	if !slot4 || rej4 != nil {
		t.Fatalf("after a release: %v, want admitted with a slot", rej4)
	}
	rt.release()
	rt.release()
	if n := rt.inflight.Load(); n != 0 {
		t.Errorf("in flight after every release: %d, want 0", n)
	}
}

// TestUpdateKeepsState: an endpoint change keeps the token bucket and the
// breaker (a refilled bucket or a closed breaker would let a burst
// through); a change of their own settings replaces them.
func TestUpdateKeepsState(t *testing.T) {
	g := New(Options{})
	rule := v1alpha1.CircuitBreaker{Strategy: v1alpha1.ErrorRatio, ThresholdPercent: 50, MinRequests: 1, WindowSeconds: 10, OpenSeconds: 5}
	svc := utiltesting.MakeService("s", "ns", "i").RateLimit(v1alpha1.RateLimit{QPS: ptr.To[int32](5)}).CircuitBreaker(rule).Obj()
	g.set(compile(svc, testPepper, []string{"a:1"}))
	v, _ := g.routes.Load("ns/s")
	rt := v.(*route)
	before := rt.state.Load()
	g.set(compile(svc, testPepper, []string{"a:1", "b:1"}))
	after := rt.state.Load()
	if after.limiter != before.limiter || after.breaker != before.breaker {
		t.Errorf("endpoint change replaced the limiter (%v) or the breaker (%v), want both kept", after.limiter != before.limiter, after.breaker != before.breaker)
	}
	svc.Spec.RateLimit.QPS = ptr.To[int32](6)
	svc.Spec.RateLimit.Burst = ptr.To[int32](6)
	svc.Spec.CircuitBreaker.OpenSeconds = 6
	g.set(compile(svc, testPepper, []string{"a:1"}))
	changed := rt.state.Load()
	if changed.limiter == before.limiter || changed.breaker == before.breaker {
		t.Errorf("settings change kept the old limiter (%v) or breaker (%v), want both new", changed.limiter == before.limiter, changed.breaker == before.breaker)
	}
	if got := changed.limiter.Limit(); got != 6 {
		t.Errorf("limit %v, want 6", got)
	}
	g.Delete("ns", "s")
	if rec := serve(g, "GET", "/ns/s/", nil, nil); rec.Code != 404 {
		t.Errorf("removed route: %d, want 404", rec.Code)
	}
}

func TestBreakerOutcome(t *testing.T) {
	errRule := &v1alpha1.CircuitBreaker{Strategy: v1alpha1.ErrorRatio, ThresholdPercent: 50}
	slowRule := &v1alpha1.CircuitBreaker{Strategy: v1alpha1.SlowCallRatio, ThresholdPercent: 50, SlowCallMilliseconds: ptr.To[int32](100)}
	tests := []struct {
		name       string
		rule       *v1alpha1.CircuitBreaker
		code       int
		elapsed    time.Duration
		clientGone bool
		want       error
	}{
		{name: "ok", rule: errRule, code: 200, want: nil},
		{name: "client error is the caller's", rule: errRule, code: 404, want: nil},
		{name: "server error", rule: errRule, code: 500, want: errFailed},
		{name: "unreachable", rule: errRule, code: 502, want: errFailed},
		{name: "slow but fine for ErrorRatio", rule: errRule, code: 200, elapsed: time.Second, want: nil},
		{name: "caller gone", rule: errRule, code: 499, clientGone: true, want: errExcluded},
		{name: "fast", rule: slowRule, code: 200, elapsed: 100 * time.Millisecond, want: nil},
		{name: "slow", rule: slowRule, code: 200, elapsed: 101 * time.Millisecond, want: errSlow},
		{name: "fast error is not slow", rule: slowRule, code: 500, elapsed: time.Millisecond, want: nil},
		{name: "timeout is slow", rule: slowRule, code: 504, elapsed: 50 * time.Millisecond, want: errSlow},
	}
	for _, tc := range tests {
		b := &breaker{rule: tc.rule}
		if got := b.outcome(tc.code, tc.elapsed, tc.clientGone); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: outcome = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{{time.Nanosecond, 1}, {time.Second, 1}, {time.Second + time.Millisecond, 2}, {2500 * time.Millisecond, 3}} {
		if got := retryAfterSeconds(tc.d); got != tc.want {
			t.Errorf("retryAfterSeconds(%s) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestRejectionBody(t *testing.T) {
	rec := httptest.NewRecorder()
	rej := reject(429, ReasonRateLimited, "slow down")
	rej.retryAfter = 20 * time.Millisecond
	rej.write(rec)
	if diff := cmp.Diff(`{"code":429,"reason":"RateLimited","message":"slow down"}`+"\n", rec.Body.String()); diff != "" {
		t.Errorf("body (-want,+got):\n%s", diff)
	}
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("status %d, headers %v", rec.Code, rec.Header())
	}
}

// TestNotReadyMessage: with no endpoint, the caller reads why, as the
// controller put it in the AIService's Ready condition.
func TestNotReadyMessage(t *testing.T) {
	g := New(Options{})
	svc := utiltesting.MakeService("s", "ns", "i").Obj()
	svc.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInstanceOffline, Message: "instance i is offline"}}
	g.set(compile(svc, testPepper, nil))
	rec := serve(g, "GET", "/ns/s/", nil, nil)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "instance i is offline") {
		t.Errorf("%d %s, want 503 saying the instance is offline", rec.Code, rec.Body)
	}
}
