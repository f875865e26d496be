package throughput

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/features"

	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/nodesim"
)

// benchNamespace holds a case's pods.
const benchNamespace = "bench"

// Measure schedules opts.Pods pods for one case ("profile" or
// "profile@N") on a fresh cluster of opts.Nodes nodes in this process and
// returns the throughput.
//
// The native case turns the GenericWorkload gate on in this process for
// its duration (the gates are process-wide): the command measures every
// case in a child process of its own.
func Measure(ctx context.Context, opts Options, name string) (_ ProfileResult, err error) {
	bc, err := parseCase(name, opts.Pods)
	if err != nil {
		return ProfileResult{}, err
	}
	var apiserverArgs []string
	if bc.native {
		was := utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload)
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(features.GenericWorkload): true}); err != nil {
			return ProfileResult{}, err
		}
		defer func() {
			if rerr := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(features.GenericWorkload): was}); rerr != nil && err == nil {
				err = rerr
			}
		}()
		apiserverArgs = []string{"--runtime-config=" + local.WorkloadAPI + "=true"}
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	// Start from a collected heap.
	runtime.GC()
	dir, err := os.MkdirTemp("", "aisched-bench-")
	if err != nil {
		return ProfileResult{}, err
	}
	defer os.RemoveAll(dir)
	begin := time.Now()
	cfg, err := profileConfig(bc.profile, opts.SchedulerConfig)
	if err != nil {
		return ProfileResult{}, err
	}
	c, err := local.Start(ctx, local.Options{
		DataDir:         dir,
		Cluster:         benchCluster(opts),
		SchedulerConfig: cfg,
		DeferScheduler:  true,
		APIServerArgs:   apiserverArgs,
		// Nodes only: no pod status traffic; few heartbeats.
		Nodes: nodesim.Options{NodesOnly: true, HeartbeatQPS: 20},
	})
	if err != nil {
		return ProfileResult{}, err
	}
	defer func() {
		if stopErr := c.Stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("stopping the bench cluster: %w", stopErr)
		}
	}()
	fmt.Fprintf(progress, "%s: cluster of %d nodes ready in %.1fs\n", bc.profile, opts.Nodes, time.Since(begin).Seconds())

	if err := createNamespace(ctx, c.Client); err != nil {
		return ProfileResult{}, err
	}
	if err := fill(ctx, c, benchNamespace, opts); err != nil {
		return ProfileResult{}, err
	}
	begin = time.Now()
	if err := createPods(ctx, c, benchNamespace, bc, opts); err != nil {
		return ProfileResult{}, err
	}
	fmt.Fprintf(progress, "%s: %d pods created in %.1fs\n", bc.profile, opts.Pods, time.Since(begin).Seconds())

	b, err := watchBindings(c.Client, opts.Pods)
	if err != nil {
		return ProfileResult{}, err
	}
	defer b.stop()
	r, err := schedule(ctx, c, b, opts, bc)
	if err != nil {
		return ProfileResult{}, err
	}
	r.Name = name
	return r, nil
}

// schedule starts the scheduler and measures it until every pod is bound:
// pods/s, load, the time per extension point, memory, and, with
// opts.ProfileTo, a CPU profile of that time and the heap at its end.
func schedule(ctx context.Context, c *local.Cluster, b *bindings, opts Options, bc benchCase) (ProfileResult, error) {
	var r ProfileResult
	before := gatherSchedulerMetrics(bc.profile)
	heapBefore := heapAfterGC()
	r.Load[0] = loadAverage()
	cpuBefore := processCPU()
	if opts.ProfileTo != "" {
		f, err := os.Create(opts.ProfileTo + ".cpu.pprof")
		if err != nil {
			return r, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return r, err
		}
		defer pprof.StopCPUProfile()
	}
	if err := c.StartScheduler(ctx); err != nil {
		return r, err
	}
	select {
	case <-b.done:
	case <-time.After(opts.Timeout):
		return r, fmt.Errorf("%d of %d pods bound after %s", b.count(), opts.Pods, opts.Timeout)
	case <-ctx.Done():
		return r, ctx.Err()
	case <-c.Failed():
		return r, c.Err()
	}
	if opts.ProfileTo != "" {
		pprof.StopCPUProfile()
	}
	r.Load[1] = loadAverage()
	cpu := processCPU() - cpuBefore
	after := gatherSchedulerMetrics(bc.profile)
	r.MicrosPerAttempt, r.Batching = after.sub(before)
	r.Memory = memoryOf(heapBefore)
	if opts.ProfileTo != "" {
		if err := writeHeapProfile(opts.ProfileTo + ".heap.pprof"); err != nil {
			return r, err
		}
	}
	first, last, n := b.span()
	r.Scheduled, r.Seconds = n, last.Sub(first).Seconds()
	if r.Seconds > 0 {
		r.PodsPerSecond = float64(n-1) / r.Seconds
	}
	if n > 0 {
		r.CPUMillisPerPod = cpu.Seconds() * 1000 / float64(n)
	}
	return r, nil
}

// createNamespace creates the namespace of the pods and waits for its
// default service account, without which no pod is admitted.
func createNamespace(ctx context.Context, client kubernetes.Interface) error {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(benchNamespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("no default service account: %w", err)
	}
	return nil
}

// bindings records when each measured pod is first seen bound.
type bindings struct {
	mu          sync.Mutex
	first, last time.Time
	seen        map[string]bool
	want        int
	done        chan struct{}
	stop        func()
}

// watchBindings watches the bench namespace's pods until want of them
// (the fill pods left out) are bound; done is closed then.
func watchBindings(client kubernetes.Interface, want int) (*bindings, error) {
	b := &bindings{seen: map[string]bool{}, want: want, done: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(benchNamespace))
	informer := factory.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    b.record,
		UpdateFunc: func(_, obj interface{}) { b.record(obj) },
	}); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	b.stop = func() { close(stop) }
	factory.Start(stop)
	cache.WaitForCacheSync(stop, informer.HasSynced)
	return b, nil
}

func (b *bindings) record(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" || pod.Labels[fillLabel] != "" {
		return
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[pod.Name] {
		return
	}
	b.seen[pod.Name] = true
	if b.first.IsZero() {
		b.first = now
	}
	b.last = now
	if len(b.seen) == b.want {
		close(b.done)
	}
}

// count is how many pods were seen bound.
func (b *bindings) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seen)
}

// span is the first and the last binding seen, and how many there were.
func (b *bindings) span() (first, last time.Time, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.first, b.last, len(b.seen)
}

// writeHeapProfile writes the heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
