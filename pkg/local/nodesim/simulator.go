// Package nodesim simulates the kubelets of a cluster's nodes. One
// Simulator serves every node: it registers the Node objects with their
// capacity (nvidia.com/gpu for GPU nodes), publishes their GPUInventory
// and NodeMetrics as the node agent would (the load is the pool's base load
// plus what the running pods declare in podload.ExpectedLoadAnnotation, or
// request), keeps their Ready condition and leases fresh,
// removes the not-ready taint, admits pods bound to them like a kubelet
// (resources, pod count), reports them Running with an IP, ends them after
// their run duration and honours their deletion.
//
// Pods are never started for real; a pod's behaviour is driven by its
// annotations (RunDurationAnnotation, ExitCodeAnnotation). The containers
// of GPU pods are created through the node agent's delivery hook, on NRI's
// runtime side (devices.go), so that every GPU pod exercises the device
// path.
package nodesim

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/aisched/aisched/pkg/agent"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
)

// Defaults of Options.
const (
	DefaultLeaseDuration        = 40 * time.Second
	DefaultLeaseRenewInterval   = 10 * time.Second
	DefaultStatusReportInterval = 5 * time.Minute
	DefaultHeartbeatQPS         = 200
	DefaultWorkers              = 8
	DefaultMetricsInterval      = 10 * time.Second
	// registerParallelism bounds concurrent node registrations at start.
	registerParallelism = 16
)

// Options configure a Simulator.
type Options struct {
	// Client talks to the apiserver.
	Client kubernetes.Interface
	// AischedClient publishes the GPU inventories.
	AischedClient versioned.Interface
	// Nodes are the nodes to simulate, usually Nodes(cluster).
	Nodes []Node
	// Clock drives heartbeats and run durations; default: the real clock.
	Clock clock.WithTicker
	// LeaseDuration is the duration written in node leases.
	LeaseDuration time.Duration
	// LeaseRenewInterval is how often each node lease is renewed (the
	// kubelet renews at a quarter of the lease duration).
	LeaseRenewInterval time.Duration
	// StatusReportInterval is how often the Ready condition's heartbeat
	// time is refreshed when nothing else changed (kubelet: 5m).
	StatusReportInterval time.Duration
	// HeartbeatQPS bounds lease and status writes per second, so that a
	// cluster of thousands of nodes does not saturate the apiserver; with
	// more nodes than HeartbeatQPS*LeaseRenewInterval, renewals stretch.
	HeartbeatQPS int
	// Workers is the number of pods handled in parallel.
	Workers int
	// NodesOnly registers and heartbeats the nodes but leaves the pods bound
	// to them alone (Pending), so that a benchmark measures the scheduler
	// without kubelet traffic. Such nodes publish no NodeMetrics.
	NodesOnly bool
	// MetricsInterval is how often each node publishes its NodeMetrics, as
	// the node agent would; default DefaultMetricsInterval; negative: never
	// (a test then writes them).
	MetricsInterval time.Duration
	// Runtime runs the containers of the pods it knows for real (in `aisched
	// up`, the demo model server); nil simulates every pod.
	Runtime Runtime
	// Slowdown, when set, returns how many times its run duration a pod
	// runs (1: as given). It is asked once per pod, when the run duration
	// has passed, with the pods the simulator knows: `aisched sim`'s
	// topologySlowdown, which slows a gang spread over domains once all
	// its members are bound.
	Slowdown func(pod *corev1.Pod, pods corelisters.PodLister) float64
}

// Runtime runs some pods' containers for real on this machine. The pod
// keeps its simulated IP; the runtime maps it to where the containers
// listen (see the Runtime's documentation). Pods it does not run stay
// simulated.
type Runtime interface {
	// Run starts the containers of pod, reachable at podIP, or updates them
	// from the pod's annotations when they run; it does nothing for a pod
	// it does not run.
	Run(ctx context.Context, pod *corev1.Pod, podIP string) error
	// Stop stops the containers of the pod with this key (namespace/name).
	Stop(key string)
}

// Simulator runs the simulated kubelets of a set of nodes.
type Simulator struct {
	client  kubernetes.Interface
	aisched versioned.Interface
	clock   clock.WithTicker
	opts    Options
	// nodesMu guards nodes, which AddNodes grows while the simulator runs.
	nodesMu  sync.RWMutex
	nodes    map[string]Node
	alloc    *allocator
	queue    workqueue.TypedRateLimitingInterface[string]
	pods     cache.SharedIndexInformer
	recorder record.EventRecorder
	// leases caches the last written lease of each node.
	leases sync.Map
	// metricsWriters publish each node's NodeMetrics; used by the
	// publishMetrics goroutine alone.
	metricsWriters map[string]*agent.MetricsWriter
	// warned remembers pods already warned about a bad annotation, so that
	// each gets one event and not one per resync.
	warned sync.Map
	// busy counts the pods being handled by a worker.
	busy atomic.Int32
	// devices creates GPU pods' containers through the delivery hook;
	// nil with NodesOnly.
	devices *devices
	// prepared is the claims the simulated DRA driver prepared (dra.go).
	prepared *prepared
	// slowed are the factors Options.Slowdown gave, by pod UID.
	slowed sync.Map
}

// New returns a Simulator for opts.Nodes.
func New(opts Options) (*Simulator, error) {
	if opts.Client == nil || opts.AischedClient == nil {
		return nil, fmt.Errorf("nodesim: no client")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.LeaseRenewInterval <= 0 {
		opts.LeaseRenewInterval = DefaultLeaseRenewInterval
	}
	if opts.StatusReportInterval <= 0 {
		opts.StatusReportInterval = DefaultStatusReportInterval
	}
	if opts.HeartbeatQPS <= 0 {
		opts.HeartbeatQPS = DefaultHeartbeatQPS
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.MetricsInterval == 0 {
		opts.MetricsInterval = DefaultMetricsInterval
	}
	s := &Simulator{
		client:  opts.Client,
		aisched: opts.AischedClient,
		clock:   opts.Clock,
		nodes:   map[string]Node{},
		opts:    opts,
		alloc:   newAllocator(),

		prepared: newPrepared(),
	}
	for _, n := range opts.Nodes {
		if _, dup := s.nodes[n.Object.Name]; dup {
			return nil, fmt.Errorf("nodesim: node %s given twice", n.Object.Name)
		}
		s.nodes[n.Object.Name] = n
	}
	return s, nil
}

// Run registers the nodes, then simulates them until ctx is cancelled.
// ready is closed once every node is registered Ready and the pods already
// bound to them are accounted for.
func (s *Simulator) Run(ctx context.Context, ready chan<- struct{}) error {
	logger := klog.FromContext(ctx).WithName("nodesim")
	ctx = klog.NewContext(ctx, logger)

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	s.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet"})

	if err := s.registerNodes(ctx); err != nil {
		return err
	}

	if s.opts.NodesOnly {
		close(ready)
		s.heartbeat(ctx)
		return nil
	}

	s.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodesim-pods", Clock: s.clock},
	)
	defer s.queue.ShutDown()
	// Only pods bound to a node matter to a kubelet.
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	}))
	s.pods = factory.Core().V1().Pods().Informer()
	if err := s.pods.AddIndexers(cache.Indexers{nodeIndex: podNode}); err != nil {
		return err
	}
	if _, err := s.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueue,
		UpdateFunc: func(_, obj interface{}) { s.enqueue(obj) },
		DeleteFunc: s.enqueue,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), s.pods.HasSynced) {
		return ctx.Err()
	}
	devices, err := newDevices(ctx, corelisters.NewPodLister(s.pods.GetIndexer()))
	if err != nil {
		return err
	}
	s.devices = devices
	defer devices.close()
	s.restorePods(ctx)

	var wg sync.WaitGroup
	for range s.opts.Workers {
		wg.Go(func() { s.runWorker(ctx) })
	}
	wg.Go(func() { s.heartbeat(ctx) })
	if s.opts.MetricsInterval > 0 {
		wg.Go(func() { s.publishMetrics(ctx) })
	}
	close(ready)
	logger.Info("Simulating nodes", "count", len(s.nodeNames()))
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
	return nil
}

func (s *Simulator) enqueue(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if !s.simulates(pod.Spec.NodeName) {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	s.queue.Add(key)
}

// simulates reports whether the node is one of the simulator's.
func (s *Simulator) simulates(name string) bool {
	s.nodesMu.RLock()
	defer s.nodesMu.RUnlock()
	_, ok := s.nodes[name]
	return ok
}

// nodeNames returns the names of the simulated nodes, sorted.
func (s *Simulator) nodeNames() []string {
	s.nodesMu.RLock()
	defer s.nodesMu.RUnlock()
	return sets.List(sets.KeySet(s.nodes))
}

func (s *Simulator) runWorker(ctx context.Context) {
	for {
		key, quit := s.queue.Get()
		if quit {
			return
		}
		s.busy.Add(1)
		after, err := s.syncPod(ctx, key)
		switch {
		case err != nil:
			klog.FromContext(ctx).V(2).Info("Retrying pod", "pod", key, "err", err)
			s.queue.AddRateLimited(key)
		case after > 0:
			s.queue.Forget(key)
			s.queue.AddAfter(key, after)
		default:
			s.queue.Forget(key)
		}
		s.queue.Done(key)
		s.busy.Add(-1)
	}
}

// Idle reports whether no pod waits to be handled now and none is being
// handled (pods that wait for a time, such as the end of their run, wait
// on the clock): for the simulator's virtual clock, which moves only when
// the cluster is idle.
func (s *Simulator) Idle() bool {
	return s.queue == nil || s.queue.Len() == 0 && s.busy.Load() == 0
}

// Holders is the simulated kubelets' own record of the cards they handed
// out, in the form of gpuledger.Holders, for comparison with the
// scheduler's GPU ledger.
func (s *Simulator) Holders() map[string]string { return s.alloc.Holders() }
