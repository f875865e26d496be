package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/agent/collect"
	"github.com/aisched/aisched/pkg/agent/nvidiasmi"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned/fake"
)

// t0 is when the tests' agents start; their fake clocks only move while the
// agent waits on them.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// fixtureRoots are the fixtures of package collect: the same 4-CPU node
// read 10 s apart (collect/testdata/README.md).
var fixtureRoots = [2]string{filepath.Join("collect", "testdata", "node-t0"), filepath.Join("collect", "testdata", "node-t1")}

// fixtureNode is a Collector of a node whose counters move as between the
// fixtures in each sample: before each snapshot it rewrites its root, the
// first snapshot of a sample with fixtureRoots[0], the second with
// fixtureRoots[1].
type fixtureNode struct {
	root string
	// broken is a file removed from root after each rewrite; none when
	// empty.
	broken    string
	snapshots int
}

// newFixtureNode returns a fixtureNode in a new directory.
func newFixtureNode(t *testing.T, broken string) *fixtureNode {
	return &fixtureNode{root: t.TempDir(), broken: broken}
}

func (f *fixtureNode) Snapshot(now time.Time) (collect.Snapshot, error) {
	if err := f.load(fixtureRoots[f.snapshots%2]); err != nil {
		return collect.Snapshot{Time: now}, err
	}
	f.snapshots++
	return (&collect.Collector{Root: f.root}).Snapshot(now)
}

func (f *fixtureNode) Performance() (collect.Performance, error) {
	return (&collect.Collector{Root: f.root}).Performance()
}

// load replaces root with a copy of fixture, less broken.
func (f *fixtureNode) load(fixture string) error {
	if err := os.RemoveAll(f.root); err != nil {
		return err
	}
	if err := os.CopyFS(f.root, os.DirFS(fixture)); err != nil {
		return err
	}
	if f.broken != "" {
		return os.Remove(filepath.Join(f.root, f.broken))
	}
	return nil
}

// gpuReader is a GPUReader that returns fixed cards and error.
type gpuReader struct {
	cards []nvidiasmi.Card
	err   error
}

func (g gpuReader) Cards(context.Context) ([]nvidiasmi.Card, error) { return g.cards, g.err }

// noGPUs is the GPUReader of a node without nvidia-smi.
var noGPUs = gpuReader{err: fmt.Errorf("%w: exec: \"nvidia-smi\": executable file not found in $PATH", nvidiasmi.ErrNotFound)}

// fixtureStatus is the status published for a sample of the fixtures
// ending at end, with a disk throughput of 100 MB/s.
func fixtureStatus(end time.Time) aischedv1alpha1.NodeMetricsStatus {
	return aischedv1alpha1.NodeMetricsStatus{
		SampleTime: metav1.NewTime(end),
		Window:     metav1.Duration{Duration: 10 * time.Second},
		Source:     aischedv1alpha1.MetricsSourceAgent,
		// The fractions of collect's TestUtilizeFixtures: 0.6, 0.75,
		// 0.15 and 0.7.
		Utilization: aischedv1alpha1.Utilization{CPU: ptr.To[int32](60), Memory: ptr.To[int32](75), Network: ptr.To[int32](15), Disk: ptr.To[int32](70)},
		// 4 processors, cpu2's cpuinfo_max_freq 3900000 kHz, MemTotal
		// 16000000 kB, eth0 at 10000 Mb/s (eth1's speed is unknown).
		Performance: aischedv1alpha1.Performance{Cores: 4, MaxFrequencyMHz: 3900, Memory: resource.NewQuantity(16000000*1024, resource.BinarySI), NetworkMbps: 10000, DiskMBps: 100},
	}
}

// newTestAgent returns an agent of node n1 that reads the fixtures, with
// a fake clock at t0, a 10 s interval and window, and a disk throughput of
// 100 MB/s; change sets other options.
func newTestAgent(t *testing.T, change func(*Options)) (*Agent, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	opts := Options{
		NodeName:  "n1",
		Client:    fake.NewSimpleClientset(),
		Collector: newFixtureNode(t, ""),
		GPUs:      noGPUs,
		Interval:  10 * time.Second,
		DiskMBps:  100,
		Clock:     clk,
	}
	if change != nil {
		change(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a, clk
}

// drive runs f, moving clk on by a second whenever something waits on it,
// until f returns or stop (when not nil) reports true; then it cancels f's
// context and returns f's error.
func drive(t *testing.T, clk *clocktesting.FakeClock, stop func() bool, f func(ctx context.Context) error) error {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		switch {
		case stop != nil && stop():
			cancel()
			return <-done
		case time.Now().After(deadline):
			t.Fatalf("not done after 30s; fake clock at %s", clk.Now().Sub(t0))
		case clk.HasWaiters():
			clk.Step(time.Second)
		default:
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// once runs a.Once on clk.
func once(t *testing.T, a *Agent, clk *clocktesting.FakeClock) error {
	t.Helper()
	return drive(t, clk, nil, a.Once)
}

// actions returns the client's requests as "verb resource[/subresource]".
func actions(c *fake.Clientset) []string {
	var got []string
	for _, a := range c.Actions() {
		r := a.GetResource().Resource
		if a.GetSubresource() != "" {
			r += "/" + a.GetSubresource()
		}
		got = append(got, a.GetVerb()+" "+r)
	}
	return got
}

// TestOnce checks that the first sample creates the NodeMetrics, owned by
// its Node when the agent can read it, and sets its status, and that the
// next sample only updates the status.
func TestOnce(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1"}}
	tests := []struct {
		name       string
		kubeClient *kubefake.Clientset
		wantOwners []metav1.OwnerReference
	}{
		{
			name:       "node readable",
			kubeClient: kubefake.NewClientset(node),
			wantOwners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-n1"}},
		},
		{
			name:       "node missing",
			kubeClient: kubefake.NewClientset(),
		},
		{
			name: "no kube client",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			a, clk := newTestAgent(t, func(o *Options) {
				o.Client = client
				if tc.kubeClient != nil {
					o.KubeClient = tc.kubeClient
				}
			})
			if err := once(t, a, clk); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"get nodemetrics", "create nodemetrics", "update nodemetrics/status"}, actions(client)); diff != "" {
				t.Errorf("requests of the first sample (-want,+got):\n%s", diff)
			}
			checkMetrics(t, client, tc.wantOwners, fixtureStatus(t0.Add(10*time.Second)))

			client.ClearActions()
			if err := once(t, a, clk); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"update nodemetrics/status"}, actions(client)); diff != "" {
				t.Errorf("requests of the second sample (-want,+got):\n%s", diff)
			}
			checkMetrics(t, client, tc.wantOwners, fixtureStatus(t0.Add(20*time.Second)))
		})
	}
}

// checkMetrics compares NodeMetrics n1 with the wanted owners and status.
func checkMetrics(t *testing.T, client *fake.Clientset, wantOwners []metav1.OwnerReference, want aischedv1alpha1.NodeMetricsStatus) {
	t.Helper()
	nm, err := client.AischedV1alpha1().NodeMetrics().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantOwners, nm.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(want, nm.Status); diff != "" {
		t.Errorf("status (-want,+got):\n%s", diff)
	}
}

// TestStaleObject checks that a status update of an object changed or
// deleted since the agent last wrote it is retried at once with the object
// read again, or created again.
func TestStaleObject(t *testing.T) {
	tests := []struct {
		name string
		// change acts on the object between the two samples.
		change       func(t *testing.T, client *fake.Clientset)
		wantRequests []string
	}{
		{
			name: "deleted",
			change: func(t *testing.T, client *fake.Clientset) {
				if err := client.AischedV1alpha1().NodeMetrics().Delete(context.Background(), "n1", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			wantRequests: []string{"update nodemetrics/status", "get nodemetrics", "create nodemetrics", "update nodemetrics/status"},
		},
		{
			name: "written by someone else",
			change: func(t *testing.T, client *fake.Clientset) {
				conflicts := 1
				client.PrependReactor("update", "nodemetrics", func(clienttesting.Action) (bool, runtime.Object, error) {
					if conflicts == 0 {
						return false, nil, nil
					}
					conflicts--
					return true, nil, apierrors.NewConflict(aischedv1alpha1.Resource("nodemetrics"), "n1", errors.New("the object has been modified"))
				})
			},
			wantRequests: []string{"update nodemetrics/status", "get nodemetrics", "update nodemetrics/status"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			a, clk := newTestAgent(t, func(o *Options) { o.Client = client })
			if err := once(t, a, clk); err != nil {
				t.Fatal(err)
			}
			tc.change(t, client)
			client.ClearActions()
			if err := once(t, a, clk); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantRequests, actions(client)); diff != "" {
				t.Errorf("requests of the second sample (-want,+got):\n%s", diff)
			}
			checkMetrics(t, client, nil, fixtureStatus(t0.Add(20*time.Second)))
		})
	}
}

// TestCollectorErrors checks that a source that fails leaves its values
// unknown, that the others are still published, and that the error is
// counted at every failed read but logged once.
func TestCollectorErrors(t *testing.T) {
	tests := []struct {
		name string
		// broken is removed from both fixtures.
		broken string
		gpus   gpuReader
		// change adjusts fixtureStatus to what is published.
		change     func(*aischedv1alpha1.NodeMetricsStatus)
		wantErrors map[string]float64
		// wantLogged are the sources whose error is logged once.
		wantLogged []string
	}{
		{
			name:       "diskstats missing",
			broken:     "proc/diskstats",
			gpus:       noGPUs,
			change:     func(s *aischedv1alpha1.NodeMetricsStatus) { s.Utilization.Disk = nil },
			wantErrors: map[string]float64{sourceUtilization: 4},
			wantLogged: []string{sourceUtilization},
		},
		{
			// Performance reads meminfo too.
			name:   "meminfo missing",
			broken: "proc/meminfo",
			gpus:   noGPUs,
			change: func(s *aischedv1alpha1.NodeMetricsStatus) {
				s.Utilization.Memory = nil
				s.Performance.Memory = nil
			},
			wantErrors: map[string]float64{sourceUtilization: 4, sourcePerformance: 2},
			wantLogged: []string{sourceUtilization, sourcePerformance},
		},
		{
			// The good card is published, the inventory is not.
			name: "nvidia-smi line malformed",
			gpus: gpuReader{
				cards: []nvidiasmi.Card{{Index: 0, Name: "Tesla T4", MemoryTotalMiB: 15360, MemoryUsedMiB: 3, UtilizationPercent: ptr.To[int32](37)}},
				err:   errors.New(`nvidia-smi: line 2: memory.total "abc": not a number`),
			},
			change: func(s *aischedv1alpha1.NodeMetricsStatus) {
				s.GPUs = []aischedv1alpha1.GPUMetrics{{Index: 0, Utilization: ptr.To[int32](37), MemoryUsedMiB: 3}}
			},
			wantErrors: map[string]float64{sourceNvidiaSMI: 2},
			wantLogged: []string{sourceNvidiaSMI},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			a, clk := newTestAgent(t, func(o *Options) {
				o.Client = client
				o.Collector = newFixtureNode(t, tc.broken)
				o.GPUs = tc.gpus
			})
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			for range 2 {
				if err := drive(t, clk, nil, func(ctx context.Context) error { return a.Once(klog.NewContext(ctx, logger)) }); err != nil {
					t.Fatal(err)
				}
			}
			want := fixtureStatus(t0.Add(20 * time.Second))
			tc.change(&want)
			checkMetrics(t, client, nil, want)
			if got := actions(client); strings.Contains(strings.Join(got, ","), "gpuinventories") {
				t.Errorf("requests %q, want none for GPUInventories", got)
			}

			wantErrors := map[string]float64{sourceUtilization: 0, sourcePerformance: 0, sourceDiskThroughput: 0, sourceNvidiaSMI: 0}
			for source, n := range tc.wantErrors {
				wantErrors[source] = n
			}
			gotErrors, err := testutil.GetCounterValuesFromGatherer(a.metrics.registry, "aisched_agent_collector_errors_total", nil, "source")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantErrors, gotErrors); diff != "" {
				t.Errorf("collector_errors_total (-want,+got):\n%s", diff)
			}
			var gotLogged []string
			for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
				if e.Type == ktesting.LogError {
					gotLogged = append(gotLogged, fmt.Sprint(e.ParameterKVList[1]))
				}
			}
			if diff := cmp.Diff(tc.wantLogged, gotLogged); diff != "" {
				t.Errorf("sources of the logged errors (-want,+got):\n%s", diff)
			}
		})
	}
}

// failingUpdates makes the first n status updates of NodeMetrics fail as if
// the apiserver were unreachable, and records the clock's time at each.
type failingUpdates struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	n     int
	times []time.Duration
}

func (f *failingUpdates) react(action clienttesting.Action) (bool, runtime.Object, error) {
	if action.GetSubresource() != "status" {
		return false, nil, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.times = append(f.times, f.clock.Since(t0))
	if len(f.times) <= f.n {
		return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	}
	return false, nil, nil
}

func (f *failingUpdates) attempts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.times)
}

// TestRunBackoff checks that Run publishes every interval and, while
// publishing fails, retries with a fresh sample after the delays of the
// backoff instead.
func TestRunBackoff(t *testing.T) {
	client := fake.NewSimpleClientset()
	a, clk := newTestAgent(t, func(o *Options) {
		o.Client = client
		o.Window = 5 * time.Second
		o.Backoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: 10, Cap: 4 * time.Second}
	})
	failures := &failingUpdates{clock: clk, n: 4}
	client.PrependReactor("update", "nodemetrics", failures.react)
	if err := drive(t, clk, func() bool { return failures.attempts() == 6 }, func(ctx context.Context) error {
		a.Run(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Each sample publishes 5 s (the window) after it starts.
	//   5: fails; backoff 1 s, the next sample starts at 6
	//  11: fails; 2 s, next at 13
	//  18: fails; 4 s, next at 22
	//  27: fails; 4 s (the cap), next at 31
	//  36: published; the next sample starts an interval after this one, at 41
	//  46: published
	want := []time.Duration{5 * time.Second, 11 * time.Second, 18 * time.Second, 27 * time.Second, 36 * time.Second, 46 * time.Second}
	if diff := cmp.Diff(want, failures.times); diff != "" {
		t.Errorf("times of the status updates (-want,+got):\n%s", diff)
	}
	if got, err := testutil.GetCounterMetricValue(a.metrics.publishErrors); err != nil || got != 4 {
		t.Errorf("publish_errors_total = %v (%v), want 4", got, err)
	}
	if got, err := testutil.GetCounterMetricValue(a.metrics.samples); err != nil || got != 6 {
		t.Errorf("samples_total = %v (%v), want 6", got, err)
	}
}

// TestNew checks the defaults and the errors of New.
func TestNew(t *testing.T) {
	client := fake.NewSimpleClientset()
	tests := []struct {
		name         string
		opts         Options
		wantInterval time.Duration
		wantWindow   time.Duration
		wantErr      string
	}{
		{
			name:         "defaults",
			opts:         Options{NodeName: "n1", Client: client},
			wantInterval: DefaultInterval,
			wantWindow:   DefaultInterval,
		},
		{
			name:         "window defaults to the interval",
			opts:         Options{NodeName: "n1", Client: client, Interval: time.Minute},
			wantInterval: time.Minute,
			wantWindow:   time.Minute,
		},
		{
			name:         "shorter window",
			opts:         Options{NodeName: "n1", Client: client, Interval: time.Minute, Window: 10 * time.Second},
			wantInterval: time.Minute,
			wantWindow:   10 * time.Second,
		},
		{
			name:    "no node name",
			opts:    Options{Client: client},
			wantErr: "Options.NodeName is required",
		},
		{
			name:    "bad node name",
			opts:    Options{NodeName: "Node_1", Client: client},
			wantErr: `Options.NodeName "Node_1": a lowercase RFC 1123 subdomain`,
		},
		{
			name:    "no client",
			opts:    Options{NodeName: "n1"},
			wantErr: "Options.Client is required",
		},
		{
			name:    "negative interval",
			opts:    Options{NodeName: "n1", Client: client, Interval: -time.Second},
			wantErr: "Options.Interval -1s is negative",
		},
		{
			name:    "negative window",
			opts:    Options{NodeName: "n1", Client: client, Window: -time.Second},
			wantErr: "Options.Window -1s is negative",
		},
		{
			name:    "window longer than the interval",
			opts:    Options{NodeName: "n1", Client: client, Window: time.Minute},
			wantErr: "Options.Window 1m0s is longer than Options.Interval 10s",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.opts.Interval != tc.wantInterval || a.opts.Window != tc.wantWindow {
				t.Errorf("interval %s, window %s; want %s, %s", a.opts.Interval, a.opts.Window, tc.wantInterval, tc.wantWindow)
			}
		})
	}
}

// TestDiskThroughput checks the performance.diskMBps published for each
// Options.DiskMBps.
func TestDiskThroughput(t *testing.T) {
	tests := []struct {
		name     string
		diskMBps int64
		probeDir string
		// wantMeasured says that diskMBps is measured, so positive but not
		// known in advance.
		wantMeasured bool
		wantDiskMBps int64
		wantErrors   float64
	}{
		{name: "configured", diskMBps: 250, wantDiskMBps: 250},
		{name: "unknown", diskMBps: -1, wantDiskMBps: 0},
		{name: "measured", probeDir: t.TempDir(), wantMeasured: true},
		{name: "probe dir missing", probeDir: filepath.Join(t.TempDir(), "missing"), wantDiskMBps: 0, wantErrors: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			a, clk := newTestAgent(t, func(o *Options) {
				o.Client = client
				o.DiskMBps = tc.diskMBps
				o.DiskProbeDir = tc.probeDir
			})
			// The second sample does not measure again.
			for range 2 {
				if err := once(t, a, clk); err != nil {
					t.Fatal(err)
				}
			}
			nm, err := client.AischedV1alpha1().NodeMetrics().Get(context.Background(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := nm.Status.Performance.DiskMBps
			if tc.wantMeasured {
				if got <= 0 {
					t.Errorf("diskMBps = %d, want a measured throughput > 0", got)
				}
				t.Logf("measured %d MB/s in %s", got, tc.probeDir)
			} else if got != tc.wantDiskMBps {
				t.Errorf("diskMBps = %d, want %d", got, tc.wantDiskMBps)
			}
			if got, err := testutil.GetCounterMetricValue(a.metrics.collectorErrors.WithLabelValues(sourceDiskThroughput)); err != nil || got != tc.wantErrors {
				t.Errorf("collector_errors_total{source=disk_throughput} = %v (%v), want %v", got, err, tc.wantErrors)
			}
			if left, _ := filepath.Glob(filepath.Join(tc.probeDir, ".aisched-throughput-*")); len(left) > 0 {
				t.Errorf("measurement left %v", left)
			}
		})
	}
}
