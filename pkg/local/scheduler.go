package local

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	aischedconfig "github.com/aisched/aisched/apis/config"
	aischedscheduler "github.com/aisched/aisched/pkg/scheduler"
)

// runScheduler runs kube-scheduler with the given configuration and
// aisched's plugins, with its shared state built afresh, until ctx is cancelled;
// started is closed once its caches are synced and it schedules. running
// holds the scheduler while it runs.
//
// It does what kube-scheduler's app.Run does without leader election,
// secure serving and the process-wide configz registration, none of which
// an in-process scheduler wants (a second cluster in the same process would
// collide on configz).
func runScheduler(ctx context.Context, restCfg *rest.Config, cfg *config.KubeSchedulerConfiguration, shared *aischedconfig.SharedConfiguration, discardEvents bool, running *atomic.Pointer[scheduler.Scheduler], started chan<- struct{}) error {
	restCfg = rest.AddUserAgent(rest.CopyConfig(restCfg), "aisched-scheduler")
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	dynClient, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	informerFactory := scheduler.NewInformerFactory(client, 0, nil)
	dynInformerFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynClient, 0, corev1.NamespaceAll, nil)
	broadcaster := events.NewEventBroadcasterAdapterWithContext(ctx, client)
	recorderFactory := func(name string) events.EventRecorderLogger { return broadcaster.NewRecorder(name) }

	sched, err := aischedscheduler.Build(ctx, aischedscheduler.BuildOptions{
		Config:          cfg,
		Shared:          aischedscheduler.NewShared(shared),
		Client:          client,
		KubeConfig:      restCfg,
		InformerFactory: informerFactory,
		DynamicFactory:  dynInformerFactory,
		Recorders:       recorderFactory,
	})
	if err != nil {
		return err
	}
	running.Store(sched)
	defer running.CompareAndSwap(sched, nil)
	if !discardEvents {
		// Without a sink the broadcaster drops what it is given.
		broadcaster.StartRecordingToSink(ctx.Done())
	}
	defer broadcaster.Shutdown()

	informerFactory.Start(ctx.Done())
	defer informerFactory.Shutdown()
	dynInformerFactory.Start(ctx.Done())
	defer dynInformerFactory.Shutdown()
	informerFactory.WaitForCacheSync(ctx.Done())
	dynInformerFactory.WaitForCacheSync(ctx.Done())
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		return fmt.Errorf("waiting for event handlers: %w", err)
	}
	close(started)
	sched.Run(ctx)
	return nil
}

func (c *Cluster) newSchedulerComponent() *component {
	return &component{name: "scheduler", run: func(ctx context.Context, started chan<- struct{}) error {
		return runScheduler(ctx, c.Config, c.schedulerConfig, c.sharedConfig, c.discardEvents, &c.runningScheduler, started)
	}}
}

// RestartScheduler stops the in-process scheduler and starts a new one
// with fresh plugin state, as a restarted scheduler process would be; it
// returns once the new one schedules. Pods in flight (assumed, waiting,
// binding) are dropped and rescheduled, as in a real restart.
func (c *Cluster) RestartScheduler(ctx context.Context) error {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	if err := c.stopSchedulerLocked(); err != nil {
		return err
	}
	return c.startSchedulerLocked(ctx)
}

// StartScheduler starts the scheduler of a cluster started with
// DeferScheduler; it returns once the scheduler schedules.
func (c *Cluster) StartScheduler(ctx context.Context) error {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	if c.scheduler != nil {
		return errors.New("scheduler already running")
	}
	return c.startSchedulerLocked(ctx)
}

func (c *Cluster) stopSchedulerLocked() error {
	if c.scheduler == nil {
		return nil
	}
	c.scheduler.cancel()
	select {
	case <-c.scheduler.done:
	case <-time.After(stopTimeout):
		return errors.New("scheduler did not stop in time")
	}
	c.scheduler = nil
	return nil
}

func (c *Cluster) startSchedulerLocked(ctx context.Context) error {
	c.scheduler = c.newSchedulerComponent()
	c.startComponent(c.compCtx, c.scheduler)
	return c.waitStarted(ctx, c.scheduler)
}
