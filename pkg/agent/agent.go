package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/agent/collect"
	"github.com/aisched/aisched/pkg/agent/nvidiasmi"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/gpu"
)

const (
	// DefaultInterval is how often the agent publishes when Options.Interval
	// is zero: often enough that the scheduler sees a node's load change
	// within a few pod starts, rarely enough that a cluster of N nodes costs
	// the apiserver N/10 small writes per second.
	DefaultInterval = 10 * time.Second
	// DiskProbeBytes is what the start-up disk measurement writes: more
	// than the write cache of most disks, so that it measures the sustained
	// rather than the burst speed, and little enough to take about a second
	// on a slow disk.
	DiskProbeBytes = 64 << 20
	// FieldManager is the agent's name in the managedFields of what it
	// writes.
	FieldManager = "aisched-agent"
)

// DefaultBackoff returns the delays between failed publishes when
// Options.Backoff is zero: 1s, doubling up to a minute, each with up to 20%
// added at random, so that the agents of all nodes do not retry in step
// after an apiserver restart.
func DefaultBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: time.Minute}
}

// Collector reads the node's counters and capacity; *collect.Collector is
// the real one. Like it, both methods return what they could read together
// with the errors of what they could not.
type Collector interface {
	Snapshot(now time.Time) (collect.Snapshot, error)
	Performance() (collect.Performance, error)
}

// GPUReader lists the node's NVIDIA GPUs; nvidiasmi.Runner is the real one.
// Cards returns an error wrapping nvidiasmi.ErrNotFound when the node has
// none, and the good cards with the errors of the bad ones otherwise.
type GPUReader interface {
	Cards(ctx context.Context) ([]nvidiasmi.Card, error)
}

var (
	_ Collector = &collect.Collector{}
	_ GPUReader = nvidiasmi.Runner{}
)

// Options configure an Agent. NodeName and Client are required; every
// other field has a default.
type Options struct {
	// NodeName is the node the agent runs on, and the name of the
	// NodeMetrics and GPUInventory it writes.
	NodeName string
	// Client writes NodeMetrics and GPUInventories.
	Client versioned.Interface
	// KubeClient reads the Node, to make it the owner of what the agent
	// writes. Nil, or a Node that cannot be read, leaves them without
	// owner.
	KubeClient kubernetes.Interface
	// Collector reads the node; default &collect.Collector{} (the root
	// file system's /proc and /sys).
	Collector Collector
	// GPUs reads the node's GPUs; default nvidiasmi.Runner{} (nvidia-smi
	// on PATH).
	GPUs GPUReader
	// Interval is the time between the starts of two samples; default
	// DefaultInterval.
	Interval time.Duration
	// Window is the span a sample averages utilisation over; default
	// Interval, and at most Interval.
	Window time.Duration
	// DiskMBps is the disk write throughput in MB/s to publish. Zero
	// measures it once, at the first sample, by writing DiskProbeBytes in
	// DiskProbeDir; negative leaves it unknown.
	DiskMBps int64
	// DiskProbeDir is where the disk measurement writes; default
	// os.TempDir(). It should be on the disk that pods use.
	DiskProbeDir string
	// Clock is the agent's time; default the real clock.
	Clock clock.Clock
	// Backoff gives the delays between failed publishes; default
	// DefaultBackoff().
	Backoff wait.Backoff
	// DRADriver is the DRA driver that publishes this node's GPUs as
	// ResourceSlices when DRA allocates them (NVIDIA's: gpu.nvidia.com).
	// While such a slice of the node exists, the agent publishes no
	// GPUInventory and withdraws its own, so that aisched's GPU ledger and
	// DRA never both hand out a card. Empty: not checked. Needs KubeClient.
	DRADriver string
}

// Agent samples a node and publishes the samples. Once and Run must not be
// called concurrently; Handler may be served meanwhile.
type Agent struct {
	opts    Options
	metrics *agentMetrics

	// Owned by the caller of Once and Run.
	diskOnce sync.Once
	diskMBps int64
	// nodeMetrics writes the samples.
	nodeMetrics *MetricsWriter
	// inventory is the GPUInventory as last read or written, at
	// inventoryRead.
	inventory     *aischedv1alpha1.GPUInventory
	inventoryRead time.Time
	// reported are the errors logged for each failing source, so that a
	// failure that repeats at every sample is logged once.
	reported map[string]sets.Set[string]
	// lastLogged is the last message of each logChange key.
	lastLogged map[string]string

	// mu guards what Handler and Cards read.
	mu sync.Mutex
	// cards are the GPUs of the last complete nvidia-smi reading.
	cards       []gpu.Card
	started     time.Time
	lastSuccess time.Time
	lastErr     error
}

// New returns an agent with the defaults of opts filled in, or an error
// naming the field of opts that is wrong.
func New(opts Options) (*Agent, error) {
	if opts.NodeName == "" {
		return nil, errors.New("Options.NodeName is required")
	}
	if errs := validation.IsDNS1123Subdomain(opts.NodeName); len(errs) > 0 {
		return nil, fmt.Errorf("Options.NodeName %q: %s", opts.NodeName, strings.Join(errs, "; "))
	}
	if opts.Client == nil {
		return nil, errors.New("Options.Client is required")
	}
	switch {
	case opts.Interval < 0:
		return nil, fmt.Errorf("Options.Interval %s is negative", opts.Interval)
	case opts.Interval == 0:
		opts.Interval = DefaultInterval
	}
	switch {
	case opts.Window < 0:
		return nil, fmt.Errorf("Options.Window %s is negative", opts.Window)
	case opts.Window == 0:
		opts.Window = opts.Interval
	case opts.Window > opts.Interval:
		return nil, fmt.Errorf("Options.Window %s is longer than Options.Interval %s", opts.Window, opts.Interval)
	}
	if opts.Collector == nil {
		opts.Collector = &collect.Collector{}
	}
	if opts.GPUs == nil {
		opts.GPUs = nvidiasmi.Runner{}
	}
	if opts.DiskProbeDir == "" {
		opts.DiskProbeDir = os.TempDir()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Backoff == (wait.Backoff{}) {
		opts.Backoff = DefaultBackoff()
	}
	a := &Agent{
		opts:       opts,
		metrics:    newAgentMetrics(),
		reported:   map[string]sets.Set[string]{},
		lastLogged: map[string]string{},
		started:    opts.Clock.Now(),
	}
	a.nodeMetrics = NewMetricsWriter(opts.Client, opts.NodeName, a.objectMeta)
	return a, nil
}

// Run publishes a sample every Interval until ctx ends. A failed publish is
// logged and retried with a fresh sample after the next delay of
// Options.Backoff instead of the rest of the interval; the delays grow while
// publishing fails and start over after a success.
func (a *Agent) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	backoff := a.opts.Backoff
	for {
		start := a.opts.Clock.Now()
		var delay time.Duration
		if err := a.Once(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			delay = backoff.Step()
			logger.Error(err, "Publishing failed", "node", a.opts.NodeName, "retryIn", delay)
		} else {
			backoff = a.opts.Backoff
			delay = a.opts.Interval - a.opts.Clock.Since(start)
		}
		if a.sleep(ctx, delay) != nil {
			return
		}
	}
}

// Once takes one sample and publishes it, without retrying. It returns the
// error of the publish, or ctx's when ctx ends first. The first call
// measures the disk when Options.DiskMBps is zero.
func (a *Agent) Once(ctx context.Context) error {
	a.diskOnce.Do(func() { a.diskMBps = a.diskThroughput(ctx) })
	s, err := a.sample(ctx)
	if err != nil {
		return err
	}
	err = a.publish(ctx, s)
	if err != nil {
		a.metrics.publishErrors.Inc()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastErr = err
	if err == nil {
		a.lastSuccess = a.opts.Clock.Now()
	}
	return err
}

// diskThroughput returns Options.DiskMBps, or measures it when it is zero;
// 0 means unknown.
func (a *Agent) diskThroughput(ctx context.Context) int64 {
	if a.opts.DiskMBps != 0 {
		return max(a.opts.DiskMBps, 0)
	}
	mbps, err := collect.MeasureDiskThroughput(a.opts.DiskProbeDir, DiskProbeBytes)
	a.report(ctx, sourceDiskThroughput, err)
	if err != nil {
		return 0
	}
	klog.FromContext(ctx).Info("Measured the disk write throughput", "dir", a.opts.DiskProbeDir, "bytes", DiskProbeBytes, "MBps", math.Round(mbps*10)/10)
	return int64(math.Round(mbps))
}

// sample is what the agent publishes at each interval.
type sample struct {
	// time is the end of the window.
	time   time.Time
	window time.Duration
	util   collect.Utilization
	perf   collect.Performance
	// diskMBps is the disk throughput, 0 when unknown.
	diskMBps int64
	// cards are the GPUs nvidia-smi could read.
	cards []nvidiasmi.Card
	// inventory is the GPUInventory spec to publish: the cards, when
	// nvidia-smi read them all. Nil when it did not, because a card missing
	// from a failed reading must not vanish from the scheduler's view.
	inventory []aischedv1alpha1.GPU
}

// sample reads the node at the start and at the end of a window, and its
// performance and GPUs at the end. Read errors are reported and leave their
// values unknown; only the end of ctx fails it.
func (a *Agent) sample(ctx context.Context) (sample, error) {
	prev, err := a.opts.Collector.Snapshot(a.opts.Clock.Now())
	a.report(ctx, sourceUtilization, err)
	if err := a.sleep(ctx, a.opts.Window); err != nil {
		return sample{}, err
	}
	cur, err := a.opts.Collector.Snapshot(a.opts.Clock.Now())
	a.report(ctx, sourceUtilization, err)
	perf, err := a.opts.Collector.Performance()
	a.report(ctx, sourcePerformance, err)
	s := sample{
		time:     cur.Time,
		window:   cur.Time.Sub(prev.Time).Round(time.Millisecond),
		util:     collect.Utilize(prev, cur),
		perf:     perf,
		diskMBps: a.diskMBps,
	}

	cards, err := a.opts.GPUs.Cards(ctx)
	switch {
	case errors.Is(err, nvidiasmi.ErrNotFound):
		a.report(ctx, sourceNvidiaSMI, nil)
		a.logChange(ctx, "gpus", "No NVIDIA GPUs; no GPUInventory is published", "reason", err)
	case err != nil:
		a.report(ctx, sourceNvidiaSMI, err)
	default:
		a.report(ctx, sourceNvidiaSMI, nil)
		a.logChange(ctx, "gpus", fmt.Sprintf("Found %d NVIDIA GPUs", len(cards)))
		for _, c := range cards {
			s.inventory = append(s.inventory, c.Inventory())
		}
		a.setCards(s.inventory)
	}
	s.cards = cards
	a.metrics.observe(s)
	return s, nil
}

// setCards keeps the cards of a complete reading for Cards, and returns
// them.
func (a *Agent) setCards(gpus []aischedv1alpha1.GPU) []gpu.Card {
	cards := gpu.FromInventory(&aischedv1alpha1.GPUInventory{Spec: aischedv1alpha1.GPUInventorySpec{GPUs: gpus}})
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cards = cards
	return cards
}

// Cards returns the node's GPUs as of the last sample that read them all,
// or reads them now when no sample has: the cards the delivery hook gives
// to containers.
func (a *Agent) Cards(ctx context.Context) ([]gpu.Card, error) {
	a.mu.Lock()
	cards := a.cards
	a.mu.Unlock()
	if cards != nil {
		return cards, nil
	}
	read, err := a.opts.GPUs.Cards(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the node's GPUs: %w", err)
	}
	gpus := make([]aischedv1alpha1.GPU, 0, len(read))
	for _, c := range read {
		gpus = append(gpus, c.Inventory())
	}
	return a.setCards(gpus), nil
}

// Sources of collector errors, the values of the source label of
// collector_errors_total.
const (
	// sourceUtilization is a snapshot of /proc and /sys counters; each
	// sample reads two.
	sourceUtilization = "utilization"
	// sourcePerformance is the node's capacity.
	sourcePerformance = "performance"
	// sourceDiskThroughput is the start-up disk measurement.
	sourceDiskThroughput = "disk_throughput"
	// sourceNvidiaSMI is nvidia-smi.
	sourceNvidiaSMI = "nvidia_smi"
)

// maxReported bounds the distinct errors remembered for a source whose
// messages keep changing; past it, the source starts over and logs again.
const maxReported = 16

// report counts a failed read of source and logs its error unless the same
// error was logged since the source last succeeded, and logs the recovery of
// a source that failed.
func (a *Agent) report(ctx context.Context, source string, err error) {
	logger := klog.FromContext(ctx)
	if err == nil {
		if a.reported[source] != nil {
			logger.Info("Collector recovered", "source", source)
			delete(a.reported, source)
		}
		return
	}
	a.metrics.collectorErrors.WithLabelValues(source).Inc()
	msg := err.Error()
	if a.reported[source].Has(msg) {
		return
	}
	if a.reported[source].Len() >= maxReported {
		a.reported[source] = nil
	}
	if a.reported[source] == nil {
		a.reported[source] = sets.New[string]()
	}
	a.reported[source].Insert(msg)
	logger.Error(err, "Collector failed; its values are unknown until it recovers", "source", source)
}

// logChange logs msg when it differs from the last message logged under key.
func (a *Agent) logChange(ctx context.Context, key, msg string, keysAndValues ...any) {
	if a.lastLogged[key] == msg {
		return
	}
	a.lastLogged[key] = msg
	klog.FromContext(ctx).Info(msg, keysAndValues...)
}

// sleep waits d on the agent's clock, or until ctx ends, and then returns
// ctx's error.
func (a *Agent) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := a.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
