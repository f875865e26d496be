package latency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	platformv1alpha1 "github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/gateway"
	"github.com/aisched/aisched/pkg/platform/keys"
	"github.com/aisched/aisched/pkg/util/percentile"
)

// The route the gateway benchmark measures: /bench/demo/<rest> to the
// demo model, with every control on.
const (
	benchNamespace = "bench"
	benchService   = "demo"
	// benchConsumer is the one key of the service's API-key Secret.
	benchConsumer = "bench"
	// benchKey is the API key the load generator sends. The gateway serves
	// on loopback only, in front of a demo model that is itself open on
	// loopback, so a fixed key gives nothing away.
	benchKey = "aisched-bench-key"
	// benchHeader is the request control's required header.
	benchHeader = "X-Aisched-Bench"
	// inferPath is the demo model's inference endpoint.
	inferPath = "/v2/models/demo/infer"
	// inferBody asks the demo model for the sum of four numbers.
	inferBody = `{"inputs":[{"name":"x","shape":[4],"datatype":"FP64","data":[1,2,3,4]}]}`
)

const (
	// lateGrace is how long after the end of a run a request that is due
	// may still start; the ones that cannot are counted missed, which
	// bounds a run at a rate the machine does not sustain.
	lateGrace = time.Second
	// requestTimeout bounds one request of the load generator; the
	// gateway's own request timeout (5 s) is shorter.
	requestTimeout = 10 * time.Second
	// settleTimeout bounds the wait for the gateway's goroutines to settle
	// before they are counted.
	settleTimeout = 2 * time.Second
)

// GatewayAddrs are the addresses a bench gateway serves on: what
// ServeGateway prints, as one JSON line.
type GatewayAddrs struct {
	// Traffic is the address of the gateway's traffic listener.
	Traffic string `json:"traffic"`
	// Admin is the address of its admin listener, with POST /gc.
	Admin string `json:"admin"`
}

// GatewayState is what POST /gc on a bench gateway answers: its goroutines
// and heap in use after two collections, its idle connections closed.
type GatewayState struct {
	Goroutines     int    `json:"goroutines"`
	HeapInuseBytes uint64 `json:"heapInuseBytes"`
}

// benchPepper is the pepper of the bench service's API key.
var benchPepper = []byte("aisched-bench-pepper-32-bytes-xx")

// benchAIService is the AIService the gateway benchmark measures, with its
// key's digest published as the controller would: every control switched
// on, none of them rejecting the load generator's requests.
func benchAIService() *platformv1alpha1.AIService {
	svc := &platformv1alpha1.AIService{
		ObjectMeta: metav1.ObjectMeta{Name: benchService, Namespace: benchNamespace},
		Spec: platformv1alpha1.AIServiceSpec{
			InstanceRef: platformv1alpha1.LocalRef{Name: benchService},
			Port:        8080,
			Path:        "/",
			Auth:        &platformv1alpha1.Auth{Method: platformv1alpha1.AuthAPIKey, SecretRef: &platformv1alpha1.LocalRef{Name: "bench-keys"}},
			Access:      &platformv1alpha1.AccessControl{AllowCIDRs: []string{"127.0.0.0/8"}},
			Request: &platformv1alpha1.RequestControl{
				Methods:             []string{http.MethodPost},
				Paths:               []string{"/v2/models/*/infer"},
				MaxBodyBytes:        ptr.To[int64](1 << 20),
				RequiredHeaders:     []string{benchHeader},
				TimeoutMilliseconds: 5000,
			},
			// The limits are on, so their accounting is measured, but
			// never reached.
			RateLimit: &platformv1alpha1.RateLimit{
				QPS:            ptr.To[int32](math.MaxInt32),
				Burst:          ptr.To[int32](math.MaxInt32),
				MaxConcurrency: ptr.To[int32](100000),
			},
			CircuitBreaker: &platformv1alpha1.CircuitBreaker{
				Strategy:         platformv1alpha1.ErrorRatio,
				ThresholdPercent: 50,
				MinRequests:      100,
				WindowSeconds:    10,
				OpenSeconds:      5,
			},
		},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-keys", Namespace: benchNamespace},
		Type:       platformv1alpha1.APIKeySecretType,
		Data:       map[string][]byte{benchConsumer: []byte(benchKey)},
	}
	digests, err := keys.Digests(benchPepper, secret)
	if err != nil {
		panic(err) // one key
	}
	svc.Status.APIKeys = digests
	return svc
}

// ServeGateway serves a gateway with BenchService in front of backend
// ("host:port") on two loopback listeners, traffic and admin, prints their
// GatewayAddrs as one JSON line on out, and serves until ctx ends. Besides
// /metrics, /healthz and /readyz, the admin listener answers POST /gc with
// the GatewayState.
func ServeGateway(ctx context.Context, backend string, out io.Writer) error {
	if _, _, err := net.SplitHostPort(backend); err != nil {
		return fmt.Errorf("backend %q: %w", backend, err)
	}
	g := gateway.New(gateway.Options{Pepper: benchPepper})
	defer g.Close()
	g.Apply(benchAIService(), []string{backend})
	g.SetReady()

	var lc net.ListenConfig
	traffic, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer traffic.Close()
	admin, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer admin.Close()
	mux := http.NewServeMux()
	mux.Handle("/", g.AdminHandler())
	// A profile of the gateway under load: go tool pprof http://ADMIN/debug/pprof/profile?seconds=10
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("POST /gc", func(w http.ResponseWriter, r *http.Request) {
		// Pooled connections to the backend are bounded by the transport,
		// not leaked; closing them leaves what would grow.
		g.Close()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(settledState(r.Context()))
	})
	servers := []*http.Server{
		{Handler: g, ReadHeaderTimeout: 10 * time.Second},
		{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
	}
	errc := make(chan error, len(servers))
	for i, l := range []net.Listener{traffic, admin} {
		go func() {
			if err := servers[i].Serve(l); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	line, err := json.Marshal(GatewayAddrs{Traffic: traffic.Addr().String(), Admin: admin.Addr().String()})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(out, "%s\n", line); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	for _, s := range servers {
		_ = s.Close()
	}
	return err
}

// settledState collects garbage and counts goroutines until their number
// stops falling (connections just closed take a moment to end), for at
// most settleTimeout.
func settledState(ctx context.Context) GatewayState {
	deadline := time.Now().Add(settleTimeout)
	last := -1
	for {
		runtime.GC()
		runtime.GC()
		n := runtime.NumGoroutine()
		if n == last || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		last = n
		time.Sleep(100 * time.Millisecond)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return GatewayState{Goroutines: runtime.NumGoroutine(), HeapInuseBytes: ms.HeapInuse}
}

// ParseRates parses a comma-separated list of request rates per second.
func ParseRates(s string) ([]int, error) {
	var rates []int
	for _, f := range strings.Split(s, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r < 1 {
			return nil, fmt.Errorf("rate %q: want a whole number of requests per second, at least 1", f)
		}
		rates = append(rates, r)
	}
	return rates, nil
}

// requestCount is the number of requests of a run at rate per second for
// d: the ones due before d ends.
func requestCount(rate int, d time.Duration) int64 {
	return (int64(rate)*int64(d) + int64(time.Second) - 1) / int64(time.Second)
}

// dueAt is when request i of a run at rate per second that starts at t0
// is due: t0 + i/rate, whatever became of the requests before it.
func dueAt(t0 time.Time, i int64, rate int) time.Time {
	return t0.Add(time.Duration(i * int64(time.Second) / int64(rate)))
}

// Target is what a load run calls: POST URL with the body and headers.
type Target struct {
	URL    string
	Header http.Header
	Body   []byte
}

// LoadOptions configure a load run.
type LoadOptions struct {
	// Rate is the requests per second, sent open loop: request i is due
	// at start + i/Rate, whether or not the earlier ones were answered.
	Rate int
	// Duration is the length of the run.
	Duration time.Duration
	// Workers is the most requests in flight, each on its keep-alive
	// connection.
	Workers int
}

// LoadResult is a load run's outcome, times in milliseconds.
//
// A request's latency runs to the end of its answer from when it was due,
// so that a generator that falls behind (every worker busy) counts the
// delay (coordinated omission corrected); except that a request whose
// worker was waiting for it counts from when the worker woke up. Waking
// up is late by up to a millisecond when the runtime's poller sleeps in
// whole milliseconds, a delay of the generator alone, about as large as
// what the gateway adds. LateP99Ms shows how late requests were sent.
type LoadResult struct {
	// Requests are the requests sent.
	Requests int `json:"requests"`
	// OK are the answers 200.
	OK int `json:"ok"`
	// Errors are the requests that got no answer.
	Errors int `json:"errors"`
	// Non200 are the answers other than 200.
	Non200 int `json:"non_200"`
	// Missed are the requests that could not be sent within a second of
	// the end of the run.
	Missed int `json:"missed"`
	// AchievedRate is the answers 200 per second over the run, or until
	// the last answer when that came later.
	AchievedRate float64 `json:"achieved_rate"`
	P50Ms        float64 `json:"p50_ms"`
	P90Ms        float64 `json:"p90_ms"`
	P99Ms        float64 `json:"p99_ms"`
	P999Ms       float64 `json:"p99_9_ms"`
	MaxMs        float64 `json:"max_ms"`
	// LateP50Ms and LateP99Ms are the percentiles of how late the
	// generator sent requests after they were due.
	LateP50Ms float64 `json:"late_p50_ms"`
	LateP99Ms float64 `json:"late_p99_ms"`
	// FirstError is one of the errors, to tell what went wrong.
	FirstError string `json:"first_error,omitempty"`
	// MachineBusyPercent is how busy all CPUs of the machine were during
	// the run (Linux /proc/stat; -1 elsewhere): load generator, backend
	// and gateway share them.
	MachineBusyPercent float64 `json:"machine_busy_percent"`
	// GatewayCPUMicrosPerRequest is the gateway process's CPU time (user
	// and system) per request sent, for runs through the gateway (Linux;
	// 0 otherwise).
	GatewayCPUMicrosPerRequest float64 `json:"gateway_cpu_us_per_request,omitempty"`
}

// loadWorker is what one worker of a load run recorded.
type loadWorker struct {
	latencies, late          []time.Duration
	sent, ok, errors, non200 int
	missed                   int
	last                     time.Time // the end of the last answer
	firstErr                 error
	timer                    *time.Timer
}

// Load runs a load of opts.Rate requests per second against target for
// opts.Duration with client, which should hold opts.Workers connections.
// It returns an error only when ctx ends; failed requests are counted.
func Load(ctx context.Context, client *http.Client, target Target, opts LoadOptions) (LoadResult, error) {
	if opts.Rate < 1 || opts.Duration <= 0 || opts.Workers < 1 {
		return LoadResult{}, fmt.Errorf("load of %d requests/s for %s with %d workers: want all positive", opts.Rate, opts.Duration, opts.Workers)
	}
	n := requestCount(opts.Rate, opts.Duration)
	workers := make([]loadWorker, opts.Workers)
	var next atomic.Int64
	t0 := time.Now()
	cutoff := t0.Add(opts.Duration + lateGrace)
	var wg sync.WaitGroup
	for w := range workers {
		lw := &workers[w]
		lw.latencies = make([]time.Duration, 0, int(n)/opts.Workers+16)
		lw.late = make([]time.Duration, 0, int(n)/opts.Workers+16)
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				due := dueAt(t0, i, opts.Rate)
				start, ok := waitDue(ctx, lw, due)
				if !ok {
					return
				}
				sent := time.Now()
				if sent.After(cutoff) {
					lw.missed++
					continue
				}
				lw.sent++
				lw.late = append(lw.late, sent.Sub(due))
				code, err := call(ctx, client, target)
				end := time.Now()
				switch {
				case err != nil:
					lw.errors++
					if lw.firstErr == nil {
						lw.firstErr = err
					}
					continue
				case code == http.StatusOK:
					lw.ok++
				default:
					lw.non200++
				}
				lw.latencies = append(lw.latencies, end.Sub(start))
				if end.After(lw.last) {
					lw.last = end
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return LoadResult{}, err
	}
	var r LoadResult
	var all, late []time.Duration
	last := t0.Add(opts.Duration)
	for i := range workers {
		lw := &workers[i]
		r.Requests += lw.sent
		if r.FirstError == "" && lw.firstErr != nil {
			r.FirstError = lw.firstErr.Error()
		}
		r.OK += lw.ok
		r.Errors += lw.errors
		r.Non200 += lw.non200
		r.Missed += lw.missed
		all = append(all, lw.latencies...)
		late = append(late, lw.late...)
		if lw.last.After(last) {
			last = lw.last
		}
	}
	r.AchievedRate = float64(r.OK) / last.Sub(t0).Seconds()
	slices.Sort(all)
	r.P50Ms = millis(percentile.NearestRank(all, 500))
	r.P90Ms = millis(percentile.NearestRank(all, 900))
	r.P99Ms = millis(percentile.NearestRank(all, 990))
	r.P999Ms = millis(percentile.NearestRank(all, 999))
	if len(all) > 0 {
		r.MaxMs = millis(all[len(all)-1])
	}
	slices.Sort(late)
	r.LateP50Ms = millis(percentile.NearestRank(late, 500))
	r.LateP99Ms = millis(percentile.NearestRank(late, 990))
	return r, nil
}

// waitDue waits on the worker's timer for a request due at due, and
// returns when its latency starts: due when it is already late (the
// generator fell behind), else when the worker woke up. It returns false
// when ctx ended.
func waitDue(ctx context.Context, lw *loadWorker, due time.Time) (time.Time, bool) {
	d := time.Until(due)
	if d <= 0 {
		return due, ctx.Err() == nil
	}
	if lw.timer == nil {
		lw.timer = time.NewTimer(d)
	} else {
		lw.timer.Reset(d)
	}
	select {
	case <-lw.timer.C:
		return time.Now(), true
	case <-ctx.Done():
		return time.Time{}, false
	}
}

// call sends one request and reads the whole answer.
func call(ctx context.Context, client *http.Client, target Target) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.URL, bytes.NewReader(target.Body))
	if err != nil {
		return 0, err
	}
	// The header is only read, by the transport, never written.
	req.Header = target.Header
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// clockTick is the unit of the CPU times in /proc (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// machineCPU returns the busy and total CPU ticks of the machine so far,
// from /proc/stat; false where there is none.
func machineCPU() (busy, total uint64, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return parseMachineStat(line)
}

// parseMachineStat reads the "cpu" line of /proc/stat: every value is
// time, the 4th (idle) and 5th (iowait) are not busy.
func parseMachineStat(line string) (busy, total uint64, ok bool) {
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy, total, true
}

// processCPU returns the user and system CPU time a process used so far,
// from /proc/PID/stat; false for pid 0 or where there is none.
func processCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcessStat(data)
}

// parseProcessStat reads utime and stime from a /proc/PID/stat line. The
// command name, in parentheses, may hold spaces and parentheses: fields
// are counted after its last closing parenthesis; utime and stime are the
// 14th and 15th fields of the line, the 12th and 13th after it.
func parseProcessStat(data []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * clockTick, true
}

// GatewayOptions configure a gateway latency run.
type GatewayOptions struct {
	// Backend is the demo model's address ("host:port").
	Backend string
	// Gateway are the addresses of the gateway under test, serving the
	// bench's AIService in front of Backend (ServeGateway).
	Gateway GatewayAddrs
	// GatewayPID is the gateway's process, whose CPU time per request is
	// reported (Linux); 0: not reported.
	GatewayPID int
	// Rates are the request rates per second measured, one after the other.
	Rates []int
	// Duration is the length of each measured run.
	Duration time.Duration
	// Warmup is the load at the same rate, not recorded, before each run.
	Warmup time.Duration
	// Idle is the pause after the last run before the gateway's goroutines
	// and heap are counted again.
	Idle time.Duration
	// Connections is the load generator's connections to each target, and
	// the most requests it has in flight.
	Connections int
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

// GatewayResult is the outcome of a gateway latency run.
type GatewayResult struct {
	CPUs            int     `json:"cpus"`
	DurationSeconds float64 `json:"duration_seconds"`
	Connections     int     `json:"connections"`
	// Rates are the results by target rate, in the order measured.
	Rates []RateResult `json:"rates"`
	// MaxSustainedRate is the highest rate that both the backend and the
	// gateway sustained; 0 when none did.
	MaxSustainedRate int `json:"max_sustained_rate"`
	// The gateway's goroutines and heap in use before the first run and
	// after the last one (and Idle), after collecting garbage, and their
	// growth.
	GoroutinesBefore     int    `json:"goroutines_before"`
	GoroutinesAfter      int    `json:"goroutines_after"`
	GoroutineGrowth      int    `json:"goroutine_growth"`
	HeapInuseBytesBefore uint64 `json:"heap_inuse_bytes_before"`
	HeapInuseBytesAfter  uint64 `json:"heap_inuse_bytes_after"`
	HeapInuseGrowthBytes int64  `json:"heap_inuse_growth_bytes"`
}

// RateResult compares the backend called directly and through the gateway
// at one rate.
type RateResult struct {
	// Rate is the target rate, requests per second.
	Rate    int        `json:"rate"`
	Direct  LoadResult `json:"direct"`
	Gateway LoadResult `json:"gateway"`
	// AddedP50Ms and AddedP99Ms are the gateway's latency percentiles
	// minus the direct ones: what the gateway adds.
	AddedP50Ms float64 `json:"added_p50_ms"`
	AddedP99Ms float64 `json:"added_p99_ms"`
	// Sustained is whether both runs achieved at least 95% of the rate
	// with no error and only answers 200.
	Sustained bool `json:"sustained"`
}

// sustained tells whether a run kept up with rate.
func sustained(r LoadResult, rate int) bool {
	return r.Errors == 0 && r.Non200 == 0 && r.AchievedRate >= 0.95*float64(rate)
}

// GatewayLatency measures, at each rate, the backend called directly and
// then through the gateway, each for opts.Duration after opts.Warmup, and
// counts the gateway's goroutines and heap before and after.
func GatewayLatency(ctx context.Context, opts GatewayOptions) (*GatewayResult, error) {
	if len(opts.Rates) == 0 || opts.Duration <= 0 || opts.Connections < 1 {
		return nil, errors.New("need at least one rate, a positive duration and a connection")
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	direct, through := benchTargets(opts.Backend, opts.Gateway.Traffic)
	transport := &http.Transport{
		Proxy:               nil, // loopback, whatever HTTP_PROXY says
		DialContext:         (&net.Dialer{}).DialContext,
		MaxIdleConns:        2 * opts.Connections,
		MaxIdleConnsPerHost: opts.Connections,
		MaxConnsPerHost:     opts.Connections,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: requestTimeout}
	run := func(name string, target Target, rate int, d time.Duration) (LoadResult, error) {
		busy0, total0, machineOK := machineCPU()
		gw0, gatewayOK := processCPU(opts.GatewayPID)
		r, err := Load(ctx, client, target, LoadOptions{Rate: rate, Duration: d, Workers: opts.Connections})
		if err != nil {
			return r, err
		}
		r.MachineBusyPercent = -1
		if busy1, total1, ok := machineCPU(); ok && machineOK && total1 > total0 {
			r.MachineBusyPercent = 100 * float64(busy1-busy0) / float64(total1-total0)
		}
		if gw1, ok := processCPU(opts.GatewayPID); ok && gatewayOK && target.URL == through.URL && r.Requests > 0 {
			r.GatewayCPUMicrosPerRequest = float64(gw1-gw0) / float64(time.Microsecond) / float64(r.Requests)
		}
		fmt.Fprintf(progress, "%s at %d/s for %s: %.0f/s achieved, p50 %.3f ms, p99 %.3f ms (sent late: p99 %.3f ms), %d errors, %d not 200, %d missed; machine %.0f%% busy\n",
			name, rate, d, r.AchievedRate, r.P50Ms, r.P99Ms, r.LateP99Ms, r.Errors, r.Non200, r.Missed, r.MachineBusyPercent)
		if r.FirstError != "" {
			fmt.Fprintf(progress, "%s: first error: %s\n", name, r.FirstError)
		}
		return r, nil
	}
	measure := func(name string, target Target, rate int) (LoadResult, error) {
		if opts.Warmup > 0 {
			if _, err := run(name+" warm-up", target, rate, opts.Warmup); err != nil {
				return LoadResult{}, err
			}
		}
		return run(name, target, rate, opts.Duration)
	}
	state := func() (GatewayState, error) {
		// The load generator's idle connections would count as the
		// gateway's goroutines.
		transport.CloseIdleConnections()
		return gatewayState(ctx, opts.Gateway.Admin)
	}

	res := &GatewayResult{CPUs: runtime.NumCPU(), DurationSeconds: opts.Duration.Seconds(), Connections: opts.Connections}
	if opts.Warmup > 0 {
		if _, err := run("gateway warm-up", through, opts.Rates[0], opts.Warmup); err != nil {
			return nil, err
		}
	}
	before, err := state()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "gateway before: %d goroutines, %d bytes of heap in use\n", before.Goroutines, before.HeapInuseBytes)
	for _, rate := range opts.Rates {
		rr := RateResult{Rate: rate}
		if rr.Direct, err = measure("direct", direct, rate); err != nil {
			return nil, err
		}
		if rr.Gateway, err = measure("gateway", through, rate); err != nil {
			return nil, err
		}
		rr.AddedP50Ms = rr.Gateway.P50Ms - rr.Direct.P50Ms
		rr.AddedP99Ms = rr.Gateway.P99Ms - rr.Direct.P99Ms
		rr.Sustained = sustained(rr.Direct, rate) && sustained(rr.Gateway, rate)
		if rr.Sustained {
			res.MaxSustainedRate = max(res.MaxSustainedRate, rate)
		}
		res.Rates = append(res.Rates, rr)
	}
	fmt.Fprintf(progress, "idle for %s\n", opts.Idle)
	select {
	case <-time.After(opts.Idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := state()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "gateway after: %d goroutines, %d bytes of heap in use\n", after.Goroutines, after.HeapInuseBytes)
	res.GoroutinesBefore, res.GoroutinesAfter = before.Goroutines, after.Goroutines
	res.GoroutineGrowth = after.Goroutines - before.Goroutines
	res.HeapInuseBytesBefore, res.HeapInuseBytesAfter = before.HeapInuseBytes, after.HeapInuseBytes
	res.HeapInuseGrowthBytes = int64(after.HeapInuseBytes) - int64(before.HeapInuseBytes)
	return res, nil
}

// benchTargets are the demo model's inference called directly and through
// the bench gateway; both send the same request, with the gateway's key and
// header, which the demo model ignores.
func benchTargets(backend, gatewayTraffic string) (direct, through Target) {
	header := http.Header{
		"Content-Type":  {"application/json"},
		"Authorization": {"Bearer " + benchKey},
		benchHeader:     {"1"},
	}
	direct = Target{URL: "http://" + backend + inferPath, Header: header, Body: []byte(inferBody)}
	through = Target{URL: "http://" + gatewayTraffic + "/" + benchNamespace + "/" + benchService + inferPath, Header: header, Body: []byte(inferBody)}
	return direct, through
}

// gatewayState asks a bench gateway's admin listener for its GatewayState.
func gatewayState(ctx context.Context, admin string) (GatewayState, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*settleTimeout+5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+admin+"/gc", nil)
	if err != nil {
		return GatewayState{}, err
	}
	// A connection of its own, closed after: nothing of it stays counted.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return GatewayState{}, fmt.Errorf("gateway state: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return GatewayState{}, fmt.Errorf("gateway state: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return GatewayState{}, fmt.Errorf("gateway state: %s: %s", resp.Status, body)
	}
	var s GatewayState
	if err := json.Unmarshal(body, &s); err != nil {
		return GatewayState{}, fmt.Errorf("gateway state %q: %w", body, err)
	}
	return s, nil
}

// WriteTable writes the result as a markdown table, one row per rate,
// then the gateway's goroutines and heap before and after.
func (r *GatewayResult) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Gateway added latency on loopback, %d CPUs, %s per rate, %d connections; latencies in ms, from when each request was due (or its worker woke up) to the end of its answer.\n\n",
		r.CPUs, time.Duration(r.DurationSeconds*float64(time.Second)), r.Connections)
	b.WriteString("| rate/s | direct p50 | direct p99 | gateway p50 | gateway p99 | added p50 | added p99 | direct achieved/s | gateway achieved/s | machine busy direct / gateway | gateway CPU per request | sustained |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|\n")
	for _, rr := range r.Rates {
		sus := "yes"
		if !rr.Sustained {
			sus = fmt.Sprintf("no (errors %d/%d, not 200 %d/%d, missed %d/%d)",
				rr.Direct.Errors, rr.Gateway.Errors, rr.Direct.Non200, rr.Gateway.Non200, rr.Direct.Missed, rr.Gateway.Missed)
		}
		fmt.Fprintf(&b, "| %d | %.3f | %.3f | %.3f | %.3f | %+.3f | %+.3f | %.0f | %.0f | %.0f%% / %.0f%% | %.0f µs | %s |\n",
			rr.Rate, rr.Direct.P50Ms, rr.Direct.P99Ms, rr.Gateway.P50Ms, rr.Gateway.P99Ms,
			rr.AddedP50Ms, rr.AddedP99Ms, rr.Direct.AchievedRate, rr.Gateway.AchievedRate,
			rr.Direct.MachineBusyPercent, rr.Gateway.MachineBusyPercent, rr.Gateway.GatewayCPUMicrosPerRequest, sus)
	}
	sustainedRate := "none"
	if r.MaxSustainedRate > 0 {
		sustainedRate = strconv.Itoa(r.MaxSustainedRate) + "/s"
	}
	fmt.Fprintf(&b, "\nHighest sustained rate: %s. Gateway goroutines %d -> %d (%+d), heap in use %.1f -> %.1f MiB (%+.1f MiB).\n",
		sustainedRate, r.GoroutinesBefore, r.GoroutinesAfter, r.GoroutineGrowth,
		mib(r.HeapInuseBytesBefore), mib(r.HeapInuseBytesAfter), float64(r.HeapInuseGrowthBytes)/(1<<20))
	_, err := io.WriteString(w, b.String())
	return err
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
