package scheduler

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler/gpustate"
)

// Services are the state that the plugins of every profile of one
// scheduler share, as upstream shares its DRA manager: the GPU ledger, the
// pod groups and the job queue. They are built once, from the services
// configuration (config.SchedulerServices), before any profile; no plugin
// argument configures them, so two profiles cannot disagree about them.
// Plugins receive them started and ready to use.
type Services struct {
	// GPUs is the one GPU ledger.
	GPUs *gpustate.State
	// Groups resolves and indexes pod groups.
	Groups *podgroup.Groups
	// Queue is the job queue.
	Queue *jobqueue.Queue

	once sync.Once
	err  error
	// client, when set, is used instead of one made from the handle's
	// kubeconfig (a simulator without an apiserver).
	client versioned.Interface
}

// NewServices builds the services from their configuration (defaulted and
// validated, config.ReadServices); Registry hands them to the plugins.
func NewServices(cfg *config.SchedulerServices) *Services {
	gpus := gpustate.New(gpustate.Options{NoFeatureDiscoveryLabels: !*cfg.GPUs.UseFeatureDiscoveryLabels})
	groups := podgroup.New()
	q := cfg.JobQueue
	queue := jobqueue.New(groups, gpus, jobqueue.Options{
		Backoff:    time.Duration(*q.BackoffSeconds) * time.Second,
		MaxBackoff: time.Duration(*q.MaxBackoffSeconds) * time.Second,
		Backfill:   *q.Backfill,
	})
	return &Services{GPUs: gpus, Groups: groups, Queue: queue}
}

// WithClient makes the services reach aisched's CRDs through client
// instead of a client built from the scheduler's kubeconfig.
func (s *Services) WithClient(client versioned.Interface) *Services {
	s.client = client
	return s
}

// start connects the services to the scheduler, once, before the first
// plugin that uses them is built. Every profile's framework handle has the
// same informers, kubeconfig and pod activator (the scheduling queue), so
// the handle that comes first gives the same services as any other:
// nothing of a profile's configuration reaches them.
func (s *Services) start(ctx context.Context, h fwk.Handle) error {
	s.once.Do(func() { s.err = s.startOnce(ctx, h) })
	return s.err
}

func (s *Services) startOnce(ctx context.Context, h fwk.Handle) error {
	client := s.client
	if client == nil {
		var err error
		if client, err = versioned.NewForConfig(h.KubeConfig()); err != nil {
			return err
		}
	}
	factory := h.SharedInformerFactory()
	logger := klog.FromContext(ctx)
	activate := func(pods map[string]*corev1.Pod) { h.Activate(logger, pods) }
	if err := s.GPUs.Start(ctx, client, factory); err != nil {
		return fmt.Errorf("GPU ledger: %w", err)
	}
	if err := s.Groups.Start(ctx, client, factory, activate); err != nil {
		return fmt.Errorf("pod groups: %w", err)
	}
	if err := s.Queue.Start(ctx, factory, activate); err != nil {
		return fmt.Errorf("job queue: %w", err)
	}
	return nil
}
