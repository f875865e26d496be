package gateway

// These tests run the gateway over real HTTP, between a real client and a
// real backend: 1xx answers, hijacked upgrades, read deadlines and answers
// that break off (http.ErrAbortHandler) only behave as in production there.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// tripOnFirst is a breaker that opens on the first bad call, for a second.
var tripOnFirst = v1alpha1.CircuitBreaker{Strategy: v1alpha1.ErrorRatio, ThresholdPercent: 50, MinRequests: 1, WindowSeconds: 10, OpenSeconds: 1}

// gatewayServer serves svc, with endpoint be, over real HTTP.
func gatewayServer(t *testing.T, svc *v1alpha1.AIService, be *httptest.Server) (*Gateway, *httptest.Server) {
	t.Helper()
	g := New(Options{})
	svc.Namespace, svc.Name = "ns", "s"
	g.set(compile(svc, testPepper, []string{strings.TrimPrefix(be.URL, "http://")}))
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	return g, gw
}

// waitRequests waits until the gateway has recorded n requests.
func waitRequests(t *testing.T, g *Gateway, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for total(g) < float64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway recorded %v requests, want %d", total(g), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// total is the sum of aisched_gateway_requests_total.
func total(g *Gateway) float64 {
	mfs, _ := g.metrics.registry.Gather()
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "aisched_gateway_requests_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestInformationalAnswers: a 1xx the pod sends (100 Continue to a caller's
// Expect, 103 Early Hints) is not the answer: the failure or rejection
// that follows must still reach the caller and the breaker.
func TestInformationalAnswers(t *testing.T) {
	tests := []struct {
		name    string
		svc     *v1alpha1.AIService
		backend http.HandlerFunc
		// requests are sent in turn; the last one's answer is checked.
		requests   int
		wantCode   int
		wantReason string
	}{
		{
			name: "chunked body over the limit, with Expect: 100-continue",
			svc:  utiltesting.MakeService("s", "ns", "i").Request(v1alpha1.RequestControl{MaxBodyBytes: ptr.To[int64](5)}).Obj(),
			backend: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
			},
			requests: 1, wantCode: 413, wantReason: ReasonBodyTooLarge,
		},
		{
			name: "5xx after 100 Continue counts for the breaker",
			svc:  utiltesting.MakeService("s", "ns", "i").CircuitBreaker(tripOnFirst).Obj(),
			backend: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				w.WriteHeader(500)
			},
			requests: 2, wantCode: 503, wantReason: ReasonCircuitOpen,
		},
		{
			name: "timeout after 103 Early Hints",
			svc:  utiltesting.MakeService("s", "ns", "i").Request(v1alpha1.RequestControl{TimeoutMilliseconds: 100}).Obj(),
			backend: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body) // so that the server sees the gateway go
				w.WriteHeader(http.StatusEarlyHints)
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			requests: 1, wantCode: 504, wantReason: ReasonUpstreamTimeout,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be := httptest.NewServer(tc.backend)
			defer be.Close()
			_, gw := gatewayServer(t, tc.svc, be)
			var resp *http.Response
			for range tc.requests {
				// A body of unknown length (chunked), 2 bytes a read.
				req, _ := http.NewRequest("POST", gw.URL+"/ns/s/x", iotest.HalfReader(strings.NewReader("1234567890")))
				req.ContentLength = -1
				req.Header.Set("Expect", "100-continue")
				var err error
				if resp, err = http.DefaultClient.Do(req); err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if resp.StatusCode != tc.wantCode || resp.Header.Get("X-Aisched-Reason") != tc.wantReason {
				t.Errorf("status %d %q, want %d %q", resp.StatusCode, resp.Header.Get("X-Aisched-Reason"), tc.wantCode, tc.wantReason)
			}
		})
	}
}

// TestBreakerProbeBrokenOff: a half-open breaker's probe whose answer
// breaks off mid-body (the proxy panics with http.ErrAbortHandler) is a
// failed call: the breaker opens again and later lets another probe
// through, rather than waiting for the lost probe forever.
func TestBreakerProbeBrokenOff(t *testing.T) {
	var calls atomic.Int32
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.WriteHeader(500)
		case 2:
			w.Header().Set("Content-Length", "100")
			_, _ = io.WriteString(w, "part")
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	defer be.Close()
	_, gw := gatewayServer(t, utiltesting.MakeService("s", "ns", "i").CircuitBreaker(tripOnFirst).Obj(), be)
	get := func() (int, string) {
		resp, err := http.Get(gw.URL + "/ns/s/x")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return resp.StatusCode, "broken off: " + err.Error()
		}
		return resp.StatusCode, string(b)
	}
	if code, _ := get(); code != 500 {
		t.Fatalf("first call: %d, want the pod's 500", code)
	}
	time.Sleep(1100 * time.Millisecond) // the breaker goes half-open
	// The probe's answer breaks off before its headers leave the gateway,
	// so the client retries the GET, and is refused.
	get()
	time.Sleep(1100 * time.Millisecond) // open again after the failed probe, then half-open
	if code, what := get(); code != 200 {
		t.Errorf("after the broken-off probe: %d %s, want a new probe that succeeds", code, what)
	}
}

// TestCallerBrokenBody: a body the caller breaks off or garbles is the
// caller's failure, not the pod's: it must not open the breaker (one
// caller could otherwise take the service away from all), and a caller
// still there is told 400.
func TestCallerBrokenBody(t *testing.T) {
	tests := []struct {
		name  string
		body  string // after the request line and Host
		close bool   // the caller goes away after it
		// wantStatus is the status line's start, "" when nobody reads it.
		wantStatus string
	}{
		{name: "caller goes away mid-body", body: "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", close: true},
		{name: "malformed chunk", body: "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n", wantStatus: "HTTP/1.1 400"},
		// A small body of known length is read whole before the pod is
		// called (forward).
		{name: "caller goes away mid-body, Content-Length", body: "Content-Length: 10\r\n\r\nhello", close: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, err := io.ReadAll(r.Body); err != nil {
					return
				}
				_, _ = io.WriteString(w, "ok")
			}))
			defer be.Close()
			g, gw := gatewayServer(t, utiltesting.MakeService("s", "ns", "i").CircuitBreaker(tripOnFirst).Obj(), be)
			conn := dial(t, gw)
			defer conn.Close()
			_, _ = io.WriteString(conn, "POST /ns/s/x HTTP/1.1\r\nHost: gw\r\n"+tc.body)
			if tc.close {
				conn.Close()
			} else {
				line, _ := bufio.NewReader(conn).ReadString('\n')
				if !strings.HasPrefix(line, tc.wantStatus) {
					t.Errorf("answer %q, want %s", line, tc.wantStatus)
				}
			}
			waitRequests(t, g, 1)
			wantNextOK(t, gw, "the breaker must not count the caller's broken body")
		})
	}
}

// TestStalledBody: a caller that stops sending its body is cut off at the
// request timeout; it neither keeps its concurrency slot nor counts against
// the pod. A body of known length is read whole before the pod is called,
// one of unknown length streams to it: both are bounded.
func TestStalledBody(t *testing.T) {
	for name, head := range map[string]string{
		// One chunk, then nothing.
		"chunked": "Transfer-Encoding: chunked\r\n\r\n1\r\na\r\n",
		// One byte of ten, then nothing.
		"Content-Length": "Content-Length: 10\r\n\r\na",
	} {
		t.Run(name, func(t *testing.T) {
			be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
			}))
			defer be.Close()
			_, gw := gatewayServer(t, utiltesting.MakeService("s", "ns", "i").
				Request(v1alpha1.RequestControl{TimeoutMilliseconds: 200}).
				RateLimit(v1alpha1.RateLimit{MaxConcurrency: ptr.To[int32](1)}).
				CircuitBreaker(tripOnFirst).Obj(), be)
			if line := statusLine(t, gw, "POST /ns/s/x HTTP/1.1\r\nHost: gw\r\n"+head); !strings.HasPrefix(line, "HTTP/1.1 504") {
				t.Fatalf("answer %q, want 504 at the request timeout", line)
			}
			wantNextOK(t, gw, "the slot is free and the breaker closed")
		})
	}
}

// TestExpectContinue: a caller that expects 100 Continue sends its body
// only when the pod asks for it; a pod that answers without it is
// answered at once, even for a body the gateway would read whole.
func TestExpectContinue(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer be.Close()
	_, gw := gatewayServer(t, utiltesting.MakeService("s", "ns", "i").Obj(), be)
	if line := statusLine(t, gw, "POST /ns/s/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"); !strings.HasPrefix(line, "HTTP/1.1 401") {
		t.Fatalf("first answer %q, want the pod's 401: the body is the pod's to ask for", line)
	}
}

// dial opens a connection of its own to the gateway; the caller closes it.
func dial(t *testing.T, gw *httptest.Server) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", gw.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// statusLine sends request on a connection of its own and returns the
// first line of the answer, within 3 seconds.
func statusLine(t *testing.T, gw *httptest.Server, request string) string {
	t.Helper()
	conn := dial(t, gw)
	defer conn.Close()
	_, _ = io.WriteString(conn, request)
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Sprintf("%q (%v)", line, err)
	}
	return line
}

// wantNextOK checks that a call after a failed one is answered 200; why
// says what that shows.
func wantNextOK(t *testing.T, gw *httptest.Server, why string) {
	t.Helper()
	resp, err := http.Get(gw.URL + "/ns/s/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("next call: %d %s, want 200: %s", resp.StatusCode, resp.Header.Get("X-Aisched-Reason"), why)
	}
}

// TestUpgradeRecorded: an upgrade is answered 101 on the hijacked
// connection, never through WriteHeader: the request is recorded with 101.
func TestUpgradeRecorded(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
	}))
	defer be.Close()
	g, gw := gatewayServer(t, utiltesting.MakeService("s", "ns", "i").Obj(), be)
	conn := dial(t, gw)
	defer conn.Close()
	_, _ = io.WriteString(conn, "GET /ns/s/ws HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 101") {
		t.Fatalf("answer %q, want 101", line)
	}
	conn.Close()
	waitRequests(t, g, 1)
	if n := testutil.ToFloat64(g.metrics.requests.WithLabelValues("ns", "s", "101")); n != 1 {
		t.Errorf("requests with code 101: %v, want 1", n)
	}
}

// TestSmallBodyReadWhole: a body of known length up to maxBufferedBody
// reaches the pod only once it has arrived whole (so that it goes in one
// write with the headers); a longer one streams, the pod called while the
// caller still sends it.
func TestSmallBodyReadWhole(t *testing.T) {
	for _, tc := range []struct {
		name   string
		length int
		whole  bool
	}{{"small", 10, true}, {"large", maxBufferedBody + 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			called := make(chan struct{}, 1)
			be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				called <- struct{}{}
				body, _ := io.ReadAll(r.Body)
				w.Header().Set("X-Got-Body-Bytes", fmt.Sprint(len(body)))
			}))
			defer be.Close()
			_, gw := gatewayServer(t, utiltesting.MakeService("s", "ns", "i").Obj(), be)
			conn := dial(t, gw)
			defer conn.Close()
			// The headers and 5 bytes of the body, the rest held back.
			_, _ = fmt.Fprintf(conn, "POST /ns/s/x HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\naaaaa", tc.length)
			if tc.whole {
				select {
				case <-called:
					t.Fatal("the pod was called before the small body arrived whole")
				case <-time.After(300 * time.Millisecond):
				}
			} else {
				select {
				case <-called:
				case <-time.After(5 * time.Second):
					t.Fatal("the pod was not called while the large body streamed")
				}
			}
			_, _ = io.WriteString(conn, strings.Repeat("a", tc.length-5))
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("X-Got-Body-Bytes"); resp.StatusCode != 200 || got != fmt.Sprint(tc.length) {
				t.Errorf("answer %d with %s bytes at the pod, want 200 with %d", resp.StatusCode, got, tc.length)
			}
		})
	}
}
