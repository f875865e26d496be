package scheduler

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	schedprofile "k8s.io/kubernetes/pkg/scheduler/profile"
	"k8s.io/utils/clock"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/generated/informers/externalversions"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/gpuledger/dra"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler/workload"
	"github.com/aisched/aisched/pkg/util/crdwatch"
)

// Shared is the state that the plugins of every profile of one scheduler
// share, as upstream shares its DRA manager (SharedDRAManager) and its
// snapshot (SharedLister): the GPU ledger, the pod groups, the job queue,
// the nodes' measured load, and the clock. It is built once, from the
// shared configuration (config.SharedConfiguration), before any profile;
// no plugin argument configures it, so two profiles cannot disagree about
// it. Plugins receive its parts started and ready to use.
type Shared struct {
	// GPUs is the one GPU ledger.
	GPUs *gpuledger.State
	// DRA is the ledger of the GPU driver's DRA devices and claims, which
	// reports to GPUs (package gpuledger/dra).
	DRA *dra.Ledger
	// Groups resolves and indexes pod groups.
	Groups *podgroup.Groups
	// Queue is the job queue.
	Queue *jobqueue.Queue
	// NodeMetrics holds the nodes' NodeMetrics by name, once started; nil
	// when the CRD is not served.
	NodeMetrics cache.Indexer
	// Workload tells whether the pods arriving ask for GPUs.
	Workload *workload.Workload
	// Clock is the time of the shared state and of every plugin: the real
	// clock, or the simulator's virtual one.
	Clock clock.WithTickerAndDelayedExecution

	once sync.Once
	err  error
	// client, when set, is used instead of one made from the handle's
	// kubeconfig (a simulator without an apiserver).
	client versioned.Interface
	// recorders, when set (Build), makes the job queue's event recorder.
	recorders schedprofile.RecorderFactory
}

// NewShared builds the shared state from its configuration (defaulted and
// validated, config.ReadShared) on the real clock; Registry hands it to
// the plugins.
func NewShared(cfg *config.SharedConfiguration) *Shared {
	return NewSharedWith(cfg, clock.RealClock{}, nil)
}

// NewSharedWith builds the shared state on clk, reaching aisched's CRDs
// through client (nil: a client built from the scheduler's kubeconfig):
// for the simulator, which runs the scheduler on a virtual clock and a
// fake clientset.
func NewSharedWith(cfg *config.SharedConfiguration, clk clock.WithTickerAndDelayedExecution, client versioned.Interface) *Shared {
	gpus := gpuledger.New(gpuledger.Options{NoFeatureDiscoveryLabels: !*cfg.GPUs.UseFeatureDiscoveryLabels})
	devices := dra.New(gpus, cfg.GPUs.DRADriver)
	groups := podgroup.New()
	q := cfg.JobQueue
	queue := jobqueue.New(groups, gpus, jobqueue.Options{
		Backoff:      time.Duration(*q.BackoffSeconds) * time.Second,
		MaxBackoff:   time.Duration(*q.MaxBackoffSeconds) * time.Second,
		Backfill:     *q.Backfill,
		PartialGroup: time.Duration(*q.PartialGroupSeconds) * time.Second,
		Clock:        clk,
	})
	return &Shared{GPUs: gpus, DRA: devices, Groups: groups, Queue: queue, Workload: workload.New(), Clock: clk, client: client}
}

// start connects the shared state to the scheduler, once, before the
// first plugin that uses it is built. Every profile's framework handle has
// the same informers, kubeconfig and pod activator (the scheduling queue),
// so the handle that comes first gives the same shared state as any other:
// nothing of a profile's configuration reaches it.
func (s *Shared) start(ctx context.Context, h fwk.Handle) error {
	s.once.Do(func() { s.err = s.startOnce(ctx, h) })
	return s.err
}

func (s *Shared) startOnce(ctx context.Context, h fwk.Handle) error {
	client := s.client
	if client == nil {
		// CRDs are served in JSON only; the scheduler's own connection
		// asks for protobuf (clientConnection.contentType), which would
		// fail every write of a PodGroup.
		cfg := rest.CopyConfig(h.KubeConfig())
		cfg.ContentType = runtime.ContentTypeJSON
		cfg.AcceptContentTypes = runtime.ContentTypeJSON
		var err error
		if client, err = versioned.NewForConfig(cfg); err != nil {
			return err
		}
	}
	factory := h.SharedInformerFactory()
	logger := klog.FromContext(ctx)
	activate := func(pods map[string]*corev1.Pod) { h.Activate(logger, pods) }
	if err := s.GPUs.Start(ctx, client, factory); err != nil {
		return fmt.Errorf("GPU ledger: %w", err)
	}
	// Volcano's PodGroups are read through the dynamic client; the
	// simulator, which brings its own client, has none.
	var dyn dynamic.Interface
	if s.client == nil && h.KubeConfig() != nil {
		var err error
		if dyn, err = dynamic.NewForConfig(h.KubeConfig()); err != nil {
			return err
		}
	}
	if err := s.Groups.Start(ctx, client, dyn, factory, activate); err != nil {
		return fmt.Errorf("pod groups: %w", err)
	}
	recorder, err := s.queueRecorder(ctx, h)
	if err != nil {
		return err
	}
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	if err := s.Queue.Start(ctx, jobqueue.Connection{Factory: factory, Client: h.ClientSet(), Aisched: client, Dynamic: dyn,
		Recorder: recorder, Activate: activate, DRA: h.SharedDRAManager(), DRAFeatures: dynamicresources.AllocatorFeatures(fts)}); err != nil {
		return fmt.Errorf("job queue: %w", err)
	}
	if err := s.Workload.Start(factory, s.GPUs); err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	nodeMetrics, err := crdwatch.Start(ctx, client, aischedv1alpha1.SchemeGroupVersion.WithResource("nodemetrics"), syncTimeout,
		func(f externalversions.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Aisched().V1alpha1().NodeMetrics().Informer()
		})
	switch {
	case err != nil:
		return fmt.Errorf("node metrics: %w", err)
	case nodeMetrics == nil:
		logger.Info("NodeMetrics CRD not installed; LoadAware scores every node from its pods' requests (install aisched's CRDs: aisched crds; and run aisched agent)")
	default:
		s.NodeMetrics = nodeMetrics.GetIndexer()
	}
	return nil
}

// queueRecorder is the job queue's event recorder, of its own component
// (jobqueue.ReportingController), not that of the profile whose plugin
// came first (default-scheduler in aisched up): from the scheduler's
// recorder factory when Build was given one (aisched up's, the
// simulator's, which drops events), else (kube-scheduler's command, whose
// factory is made inside it) a broadcaster of its own to the events API,
// until ctx ends.
func (s *Shared) queueRecorder(ctx context.Context, h fwk.Handle) (events.EventRecorder, error) {
	if s.recorders != nil {
		return s.recorders(jobqueue.ReportingController), nil
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: h.ClientSet().EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("job queue events: %w", err)
	}
	context.AfterFunc(ctx, broadcaster.Shutdown)
	return broadcaster.NewRecorder(scheme.Scheme, jobqueue.ReportingController), nil
}

// Metrics returns the shared state's metrics and the collectors of its
// parts, for the scheduler's metrics registry: `aisched scheduler`
// registers them with kube-scheduler's; the simulator and aisched up do
// not.
func (s *Shared) Metrics() ([]metrics.Registerable, []metrics.StableCollector) {
	return s.Queue.Metrics(), []metrics.StableCollector{s.GPUs.Collector(), s.DRA.Collector()}
}

// syncTimeout bounds the wait for the NodeMetrics cache at start.
const syncTimeout = 30 * time.Second
