package local

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// runScheduler runs kube-scheduler with the given configuration and
// out-of-tree registry until ctx is cancelled; started is closed once its
// caches are synced and it schedules.
//
// It does what kube-scheduler's app.Run does without leader election,
// secure serving and the process-wide configz registration, none of which
// an in-process scheduler wants (a second cluster in the same process would
// collide on configz).
func runScheduler(ctx context.Context, restCfg *rest.Config, cfg *config.KubeSchedulerConfiguration, registry frameworkruntime.Registry, discardEvents bool, started chan<- struct{}) error {
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

	sched, err := scheduler.New(ctx, client, informerFactory, dynInformerFactory, recorderFactory,
		scheduler.WithComponentConfigVersion(cfg.APIVersion),
		scheduler.WithKubeConfig(restCfg),
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		scheduler.WithFrameworkOutOfTreeRegistry(registry),
		scheduler.WithPodMaxBackoffSeconds(cfg.PodMaxBackoffSeconds),
		scheduler.WithPodInitialBackoffSeconds(cfg.PodInitialBackoffSeconds),
		scheduler.WithExtenders(cfg.Extenders...),
		scheduler.WithParallelism(cfg.Parallelism),
	)
	if err != nil {
		return err
	}
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
