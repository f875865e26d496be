package local

import (
	"context"
	"fmt"
	"sync/atomic"

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
// aisched's plugins, with services built afresh, until ctx is cancelled;
// started is closed once its caches are synced and it schedules. running
// holds the scheduler while it runs.
//
// It does what kube-scheduler's app.Run does without leader election,
// secure serving and the process-wide configz registration, none of which
// an in-process scheduler wants (a second cluster in the same process would
// collide on configz).
func runScheduler(ctx context.Context, restCfg *rest.Config, cfg *config.KubeSchedulerConfiguration, services *aischedconfig.SchedulerServices, discardEvents bool, running *atomic.Pointer[scheduler.Scheduler], started chan<- struct{}) error {
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
		Services:        aischedscheduler.NewServices(services),
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
