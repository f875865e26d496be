package simcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	kubescheduler "k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/local/nodesim"
	aischedscheduler "github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/simcluster/vclock"
)

// epoch is where the fast engine's clock starts, the same in every run.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Quiet is how the fast engine tells that the cluster has done all it can
// before its clock moves: quietRounds checks in a row, quietPause apart in
// real time, find no write to the fake apiserver and every component idle
// (the scheduler's active and backoff queues empty and no pod in a cycle
// except those waiting in Permit, no preemption deleting its victims, the
// kubelets' queue empty, the job queue not in a pass). Watch events reach informers within microseconds;
// the pause leaves them that long and more.
const (
	quietRounds = 3
	quietPause  = 300 * time.Microsecond
)

// fastCluster is the fast engine's cluster.
type fastCluster struct {
	api    *fakeAPI
	clock  *vclock.Clock
	sched  *kubescheduler.Scheduler
	shared *aischedscheduler.Shared
	nodes  *nodesim.Simulator
	// waiting iterates over the pods waiting in Permit (one map serves
	// every profile).
	waiting fwk.Handle
	// preemptions are the profiles' DefaultPreemption executors, which
	// delete a preemptor's victims in goroutines of their own.
	preemptions []*preemption.Executor

	cancel context.CancelFunc
	wg     sync.WaitGroup
	errMu  sync.Mutex
	err    error
}

func startFast(ctx context.Context, opts Options) (Cluster, error) {
	if opts.SharedConfig == nil {
		opts.SharedConfig = aischedconfig.DefaultShared()
	}
	c, err := startFastAt(ctx, epoch, opts, func(*fakeAPI) error { return nil })
	if err != nil {
		return nil, err
	}
	return c, nil
}

// startFastAt starts a fast-engine cluster whose clock reads start, with
// load's objects in its API before anything watches it, and simulated
// kubelets for opts.NodePools when there are any.
func startFastAt(ctx context.Context, start time.Time, opts Options, load func(*fakeAPI) error) (_ *fastCluster, err error) {
	clk := vclock.New(start)
	api := newFakeAPI(clk)
	if err := load(api); err != nil {
		return nil, err
	}
	if opts.ResourceQuotas {
		api.modelQuotas()
	} else {
		api.core.PrependReactor("create", "resourcequotas", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(corev1.Resource("resourcequotas"), "",
				errors.New("this simulation has no ResourceQuota admission or quota controller"))
		})
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &fastCluster{api: api, clock: clk, cancel: cancel}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Stop())
		}
	}()

	if len(opts.NodePools) > 0 {
		f.nodes, err = nodesim.New(nodesim.Options{
			Client: api.core, AischedClient: api.aisched, Clock: clk,
			Nodes:     nodesim.Nodes(&clusterfile.Cluster{APIVersion: clusterfile.APIVersion, Kind: clusterfile.Kind, NodePools: opts.NodePools}),
			NodesOnly: opts.NodesOnly, MetricsInterval: opts.MetricsInterval, Slowdown: opts.Slowdown,
		})
		if err != nil {
			return nil, err
		}
		ready := make(chan struct{})
		f.run("nodes", func() error { return f.nodes.Run(runCtx, ready) })
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}

	informerFactory := kubescheduler.NewInformerFactory(api.core, 0, nil)
	// The plugins register events of aisched's CRDs, which the scheduler
	// watches through dynamic informers; they only requeue pods when
	// inventories or samples change, which the simulated nodes never do
	// after they registered.
	dynClient := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		aischedv1alpha1.SchemeGroupVersion.WithResource("gpuinventories"): "GPUInventoryList",
		aischedv1alpha1.SchemeGroupVersion.WithResource("nodemetrics"):    "NodeMetricsList",
	})
	dynFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynClient, 0, corev1.NamespaceAll, nil)
	// No sink: the scheduler's Events are dropped (nobody reads them in a
	// simulation, and they would be most of the writes).
	broadcaster := events.NewEventBroadcasterAdapterWithContext(runCtx, api.core)
	f.shared = aischedscheduler.NewSharedWith(opts.SharedConfig, clk, api.aisched)
	f.sched, err = aischedscheduler.Build(runCtx, aischedscheduler.BuildOptions{
		Config: opts.SchedulerConfig, Shared: f.shared, Client: api.core,
		InformerFactory: informerFactory, DynamicFactory: dynFactory,
		Recorders: func(name string) events.EventRecorderLogger { return broadcaster.NewRecorder(name) },
	})
	if err != nil {
		return nil, err
	}
	for _, p := range f.sched.Profiles {
		f.waiting = p
		break
	}
	for _, p := range f.sched.Profiles {
		for _, pl := range p.PreEnqueuePlugins() {
			if dp, ok := pl.(*defaultpreemption.DefaultPreemption); ok {
				f.preemptions = append(f.preemptions, dp.Executor)
			}
		}
	}
	informerFactory.Start(runCtx.Done())
	dynFactory.Start(runCtx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	dynFactory.WaitForCacheSync(ctx.Done())
	if err := f.sched.WaitForHandlersSync(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the scheduler's event handlers: %w", err)
	}
	f.run("scheduler", func() error {
		f.sched.Run(runCtx)
		broadcaster.Shutdown()
		informerFactory.Shutdown()
		dynFactory.Shutdown()
		return nil
	})
	return f, f.quiesce(ctx)
}

// run runs a component until the cluster stops; its error ends the
// cluster's next RunUntil.
func (f *fastCluster) run(name string, fn func() error) {
	f.wg.Go(func() {
		if err := fn(); err != nil {
			f.errMu.Lock()
			f.err = errors.Join(f.err, fmt.Errorf("%s: %w", name, err))
			f.errMu.Unlock()
		}
	})
}

func (f *fastCluster) Client() kubernetes.Interface { return f.api.core }
func (f *fastCluster) Aisched() versioned.Interface { return f.api.aisched }
func (f *fastCluster) Now() time.Time               { return f.clock.Now() }

// SchedulerPlugins implements Cluster.
func (f *fastCluster) SchedulerPlugins(profile string) (*config.Plugins, bool) {
	return aischedscheduler.ProfilePlugins(f.sched, profile)
}

// KubeletHolders is nil for a snapshot, which has no simulated kubelets.
func (f *fastCluster) KubeletHolders() map[string]string {
	if f.nodes == nil {
		return nil
	}
	return f.nodes.Holders()
}

// WaitAdmissible has nothing to wait for: the fast engine admits pods in
// any namespace at once.
func (f *fastCluster) WaitAdmissible(context.Context, []string) error { return nil }

// RunUntil moves the virtual clock to t: whenever the cluster is quiet,
// to the next timer or ticker due (a pod's end, a backoff, a Permit
// timeout, a heartbeat), which fires, until none is due by t.
func (f *fastCluster) RunUntil(ctx context.Context, t time.Time) error {
	for {
		if err := f.quiesce(ctx); err != nil {
			return err
		}
		if !f.clock.Step(t) {
			return nil
		}
	}
}

// quiesce waits until the cluster is quiet (see Quiet).
func (f *fastCluster) quiesce(ctx context.Context) error {
	last := f.api.writes.Load()
	for quiet := 0; quiet < quietRounds; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(quietPause):
		}
		f.errMu.Lock()
		err := f.err
		f.errMu.Unlock()
		if err != nil {
			return err
		}
		if w := f.api.writes.Load(); w != last || !f.idle() {
			quiet, last = 0, w
			continue
		}
		quiet++
	}
	return nil
}

// idle reports whether no component has work it can do before the clock
// moves.
func (f *fastCluster) idle() bool {
	q := f.sched.SchedulingQueue
	if len(q.PodsInActiveQ()) > 0 || len(q.PodsInBackoffQ()) > 0 {
		return false
	}
	waiting := 0
	f.waiting.IterateOverWaitingPods(func(fwk.WaitingPod) { waiting++ })
	return len(q.InFlightPods()) == waiting && (f.nodes == nil || f.nodes.Idle()) && f.shared.Queue.Idle() && !f.preempting()
}

// preempting reports whether a pending pod's preemption is still deleting
// its victims: the pod waits in no active queue meanwhile, and the
// deletions are writes to come, however long a loaded machine takes to
// start them.
func (f *fastCluster) preempting() bool {
	if len(f.preemptions) == 0 {
		return false
	}
	pending, _ := f.sched.SchedulingQueue.PendingPods()
	for _, p := range pending {
		for _, e := range f.preemptions {
			if e.IsPodRunningPreemption(p.UID) {
				return true
			}
		}
	}
	return false
}

// Stop stops every component and waits for them.
func (f *fastCluster) Stop() error {
	f.cancel()
	f.wg.Wait()
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return f.err
}
