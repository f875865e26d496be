package scheduler

import (
	"context"

	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubescheduler "k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedprofile "k8s.io/kubernetes/pkg/scheduler/profile"
)

// BuildOptions are what an in-process scheduler is built from.
type BuildOptions struct {
	// Config is the scheduler's configuration (ReadConfig).
	Config *config.KubeSchedulerConfiguration
	// Shared is the state every profile shares, built once per scheduler.
	Shared *Shared
	// Client, KubeConfig and the informer factories reach the cluster;
	// KubeConfig may be nil when Shared has its own client.
	Client          kubernetes.Interface
	KubeConfig      *rest.Config
	InformerFactory informers.SharedInformerFactory
	DynamicFactory  dynamicinformer.DynamicSharedInformerFactory
	// Recorders makes the profiles' event recorders.
	Recorders schedprofile.RecorderFactory
}

// Build returns kube-scheduler with aisched's plugins and opts.Shared,
// configured as opts.Config says, as `aisched up` and the simulator run it
// in-process; its scheduling queue runs on the shared state's clock. (`aisched
// scheduler` builds it through kube-scheduler's own command, with the same
// Registry.) The caller starts the informer factories and runs it.
func Build(ctx context.Context, opts BuildOptions) (*kubescheduler.Scheduler, error) {
	cfg := opts.Config
	// The job queue's events come from a recorder of the same factory,
	// under its own name.
	opts.Shared.recorders = opts.Recorders
	return kubescheduler.New(ctx, opts.Client, opts.InformerFactory, opts.DynamicFactory, opts.Recorders,
		kubescheduler.WithComponentConfigVersion(cfg.APIVersion),
		kubescheduler.WithKubeConfig(opts.KubeConfig),
		kubescheduler.WithProfiles(cfg.Profiles...),
		kubescheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		kubescheduler.WithFrameworkOutOfTreeRegistry(Registry(opts.Shared)),
		kubescheduler.WithPodMaxBackoffSeconds(cfg.PodMaxBackoffSeconds),
		kubescheduler.WithPodInitialBackoffSeconds(cfg.PodInitialBackoffSeconds),
		kubescheduler.WithExtenders(cfg.Extenders...),
		kubescheduler.WithParallelism(cfg.Parallelism),
		kubescheduler.WithClock(opts.Shared.Clock),
	)
}
