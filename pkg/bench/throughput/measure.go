package throughput

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/featuregate"

	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/simcluster"
)

// benchNamespace holds a case's pods.
const benchNamespace = "bench"

// Measure schedules opts.Pods pods for one case ("profile" or
// "profile@N") on a fresh cluster of opts.Nodes nodes in this process and
// returns the throughput.
//
// The native case turns the GenericWorkload gate (and, with racks,
// TopologyAwareWorkloadScheduling) on in this process for its duration
// (the gates are process-wide): the command measures every
// case in a child process of its own.
func Measure(ctx context.Context, opts Options, name string) (_ ProfileResult, err error) {
	bc, err := parseCase(name, opts.Pods)
	if err != nil {
		return ProfileResult{}, err
	}
	var apiserverArgs []string
	if bc.native {
		gates := rackGates(opts.RackNodes > 0)
		was := make(map[string]bool, len(gates))
		for g := range gates {
			was[g] = utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(g))
		}
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
			return ProfileResult{}, err
		}
		defer func() {
			if rerr := utilfeature.DefaultMutableFeatureGate.SetFromMap(was); rerr != nil && err == nil {
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

	pods, err := simcluster.ObserveClient(ctx, c.Client, time.Now)
	if err != nil {
		return ProfileResult{}, err
	}
	defer pods.Stop()
	r, err := schedule(ctx, c, pods, opts, bc)
	if err != nil {
		return ProfileResult{}, err
	}
	if r.NodesUsed, err = checkClaims(ctx, c.Client, opts); err != nil {
		return ProfileResult{}, err
	}
	r.Name = name
	return r, nil
}

// schedule starts the scheduler and measures it until every pod is bound:
// pods/s, load, the time per extension point, memory, and, with
// opts.ProfileTo, a CPU profile of that time and the heap at its end.
func schedule(ctx context.Context, c *local.Cluster, pods *simcluster.PodObserver, opts Options, bc benchCase) (ProfileResult, error) {
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
	racks := opts.RackNodes > 0 && bc.groupSize > 0
	if racks && bc.native {
		plugins, _ := c.SchedulerPlugins(bc.profile)
		if err := checkNativeTopology(plugins); err != nil {
			return r, err
		}
	}
	first, last, n, err := waitBound(ctx, c, pods, opts)
	if err != nil {
		return r, err
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
	if racks {
		if err := checkGangsInRacks(ctx, c.Client, pods, opts.Pods, bc); err != nil {
			return r, err
		}
	}
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

// waitBound waits until each of the opts.Pods pods of the case is seen
// bound, and returns the first and the last binding and how many there were.
func waitBound(ctx context.Context, c *local.Cluster, pods *simcluster.PodObserver, opts Options) (first, last time.Time, n int, err error) {
	waitCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	go func() {
		select {
		case <-c.Failed():
			cancel()
		case <-waitCtx.Done():
		}
	}()
	for i := range opts.Pods {
		s, err := pods.Wait(waitCtx, benchNamespace+"/"+benchPodName(i), func(s simcluster.PodState) bool { return !s.Bound.IsZero() })
		if err != nil {
			select {
			case <-c.Failed():
				return first, last, n, c.Err()
			default:
			}
			if ctx.Err() != nil {
				return first, last, n, ctx.Err()
			}
			return first, last, n, fmt.Errorf("%d of %d pods bound after %s", boundCount(pods, opts.Pods), opts.Pods, opts.Timeout)
		}
		n++
		if first.IsZero() || s.Bound.Before(first) {
			first = s.Bound
		}
		if s.Bound.After(last) {
			last = s.Bound
		}
	}
	return first, last, n, nil
}

// boundCount is how many of the n pods of a case pods saw bound.
func boundCount(pods *simcluster.PodObserver, n int) int {
	bound := 0
	for i := range n {
		if s, ok := pods.Pod(benchNamespace + "/" + benchPodName(i)); ok && !s.Bound.IsZero() {
			bound++
		}
	}
	return bound
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
