package latency

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aisched/aisched/pkg/gateway"
)

func TestSchedule(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		rate      int
		d         time.Duration
		wantCount int64
		// wantDue are the offsets from t0 of the first requests.
		wantDue []time.Duration
	}{
		// 4/s: one every 250ms; 4*1s = 4 requests.
		{name: "4/s for 1s", rate: 4, d: time.Second, wantCount: 4,
			wantDue: []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond}},
		// 3/s: i/3 s, rounded down to the nanosecond; 3*1.5s = 4.5, so the
		// 5 due before 1.5s (0, 0.33, 0.67, 1, 1.33).
		{name: "3/s for 1.5s", rate: 3, d: 1500 * time.Millisecond, wantCount: 5,
			wantDue: []time.Duration{0, 333333333, 666666666, time.Second, 1333333333}},
		// 5000/s: one every 200µs; 5000*20s = 100000 requests.
		{name: "5000/s for 20s", rate: 5000, d: 20 * time.Second, wantCount: 100000,
			wantDue: []time.Duration{0, 200 * time.Microsecond, 400 * time.Microsecond}},
		// 200/s for 2s, the integration test's: 400 requests, 5ms apart.
		{name: "200/s for 2s", rate: 200, d: 2 * time.Second, wantCount: 400,
			wantDue: []time.Duration{0, 5 * time.Millisecond, 10 * time.Millisecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := requestCount(tc.rate, tc.d); got != tc.wantCount {
				t.Errorf("requestCount = %d, want %d", got, tc.wantCount)
			}
			var got []time.Duration
			for i := range len(tc.wantDue) {
				got = append(got, dueAt(t0, int64(i), tc.rate).Sub(t0))
			}
			if diff := cmp.Diff(tc.wantDue, got); diff != "" {
				t.Errorf("due times (-want,+got):\n%s", diff)
			}
			// The last request is due before the run ends, the next one not.
			if last := dueAt(t0, tc.wantCount-1, tc.rate); !last.Before(t0.Add(tc.d)) {
				t.Errorf("last request due at +%v, not before the end +%v", last.Sub(t0), tc.d)
			}
			if after := dueAt(t0, tc.wantCount, tc.rate); after.Before(t0.Add(tc.d)) {
				t.Errorf("request %d due at +%v, before the end +%v, but not sent", tc.wantCount, after.Sub(t0), tc.d)
			}
		})
	}
}

func TestSustained(t *testing.T) {
	cases := []struct {
		name string
		run  LoadResult
		want bool
	}{
		// 95% of 1000/s is 950/s.
		{name: "95% of the rate", run: LoadResult{AchievedRate: 950}, want: true},
		{name: "below 95%", run: LoadResult{AchievedRate: 949.9}, want: false},
		{name: "an error", run: LoadResult{AchievedRate: 1000, Errors: 1}, want: false},
		{name: "an answer not 200", run: LoadResult{AchievedRate: 1000, Non200: 1}, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sustained(tc.run, 1000); got != tc.want {
				t.Errorf("sustained(%+v, 1000/s) = %v, want %v", tc.run, got, tc.want)
			}
		})
	}
}

func TestParseRates(t *testing.T) {
	cases := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{in: "1000,2000, 5000", want: []int{1000, 2000, 5000}},
		{in: "200", want: []int{200}},
		{in: "1000,0", wantErr: `rate "0"`},
		{in: "fast", wantErr: `rate "fast"`},
		{in: "", wantErr: `rate ""`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRates(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseRates(%q) error %v, want one with %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseRates(%q) (-want,+got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestBenchServicePasses sends the load generator's request through a
// gateway with the bench service: every control on, none refusing it.
func TestBenchServicePasses(t *testing.T) {
	var got atomic.Value
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Method + " " + r.URL.Path + " consumer=" + r.Header.Get("X-Aisched-Consumer") + " auth=" + r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, "ok")
	}))
	defer backend.Close()
	g := gateway.New(gateway.Options{Pepper: benchPepper})
	defer g.Close()
	g.Apply(benchAIService(), []string{strings.TrimPrefix(backend.URL, "http://")})
	front := httptest.NewServer(g)
	defer front.Close()

	_, through := benchTargets("unused:1", strings.TrimPrefix(front.URL, "http://"))
	code, err := call(context.Background(), front.Client(), through)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("through the gateway: %d, want 200", code)
	}
	// The key never reaches the backend; the consumer does.
	if diff := cmp.Diff("POST /v2/models/demo/infer consumer=bench auth=", got.Load()); diff != "" {
		t.Errorf("backend saw (-want,+got):\n%s", diff)
	}
	// Without the required header the same request is refused: the
	// controls are really on.
	missing := through
	missing.Header = through.Header.Clone()
	missing.Header.Del(benchHeader)
	if code, err := call(context.Background(), front.Client(), missing); err != nil || code != http.StatusBadRequest {
		t.Errorf("without %s: %d, %v; want 400", benchHeader, code, err)
	}
}

func TestLoad(t *testing.T) {
	cases := []struct {
		name    string
		opts    LoadOptions
		handler http.HandlerFunc
		want    LoadResult
		// wantMinMaxMs is a lower bound of the largest latency.
		wantMinMaxMs float64
	}{
		{
			// 100/s for 200ms: 20 requests, each answered.
			name: "answers 200",
			opts: LoadOptions{Rate: 100, Duration: 200 * time.Millisecond, Workers: 4},
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, "ok")
			},
			want: LoadResult{Requests: 20, OK: 20},
		},
		{
			// Every other request refused: 10 of 20 not 200.
			name: "answers 500",
			opts: LoadOptions{Rate: 100, Duration: 200 * time.Millisecond, Workers: 4},
			handler: func() http.HandlerFunc {
				var n atomic.Int64
				return func(w http.ResponseWriter, _ *http.Request) {
					if n.Add(1)%2 == 0 {
						w.WriteHeader(http.StatusInternalServerError)
					}
				}
			}(),
			want: LoadResult{Requests: 20, OK: 10, Non200: 10},
		},
		{
			// Coordinated omission: 20 requests due every 10ms, one worker,
			// 20ms per answer. Request i is sent at about 20ms*i and
			// answered at 20ms*(i+1); counted from its due time 10ms*i, the
			// last one (i=19) waited 400-190 = 210ms, not the 20ms a
			// generator that waits for answers would see.
			name: "falling behind counts the delay",
			opts: LoadOptions{Rate: 100, Duration: 200 * time.Millisecond, Workers: 1},
			handler: func(w http.ResponseWriter, _ *http.Request) {
				time.Sleep(20 * time.Millisecond)
			},
			want:         LoadResult{Requests: 20, OK: 20},
			wantMinMaxMs: 150,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := httptest.NewServer(tc.handler)
			defer s.Close()
			got, err := Load(context.Background(), s.Client(), Target{URL: s.URL, Body: []byte("{}")}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got.MaxMs < tc.wantMinMaxMs {
				t.Errorf("max latency %.1f ms, want at least %.1f ms", got.MaxMs, tc.wantMinMaxMs)
			}
			if got.OK > 0 && (got.P50Ms <= 0 || got.P50Ms > got.P99Ms || got.P99Ms > got.MaxMs || got.AchievedRate <= 0) {
				t.Errorf("p50 %v, p99 %v, max %v ms, achieved %v/s: want 0 < p50 <= p99 <= max and a positive rate", got.P50Ms, got.P99Ms, got.MaxMs, got.AchievedRate)
			}
			counts := LoadResult{Requests: got.Requests, OK: got.OK, Errors: got.Errors, Non200: got.Non200, Missed: got.Missed}
			if diff := cmp.Diff(tc.want, counts); diff != "" {
				t.Errorf("counts (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLoadCancelled(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Load(ctx, s.Client(), Target{URL: s.URL}, LoadOptions{Rate: 1, Duration: time.Hour, Workers: 1}); err == nil {
		t.Error("cancelled load: no error, want one")
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis; utime 1234 and stime
	// 66 ticks of 10ms: 13s.
	line := []byte("4242 (aisched (x) y) S 1 4242 4242 0 -1 4194560 500 0 0 0 1234 66 0 0 20 0 12 0 100 0 0")
	if got, ok := parseProcessStat(line); !ok || got != 13*time.Second {
		t.Errorf("parseProcessStat = %s, %v, want 13s", got, ok)
	}
	if _, ok := parseProcessStat([]byte("4242 (short) S 1")); ok {
		t.Error("a truncated line parsed")
	}
	// busy = user 10 + nice 2 + system 3 + irq 1 + softirq 1 + steal 0 = 17;
	// total = 17 + idle 80 + iowait 3 = 100.
	busy, total, ok := parseMachineStat("cpu  10 2 3 80 3 1 1 0 0 0")
	if !ok || busy != 17 || total != 100 {
		t.Errorf("parseMachineStat = %d, %d, %v, want 17, 100", busy, total, ok)
	}
	if _, _, ok := parseMachineStat("cpu0 1 2 3 4 5"); ok {
		t.Error("a per-CPU line parsed as the machine's")
	}
}
