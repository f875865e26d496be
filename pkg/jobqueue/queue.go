package jobqueue

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/queuetree"
	"github.com/aisched/aisched/pkg/topology"
)

// Options configure a Queue.
type Options struct {
	// Backoff is the first wait after a failed attempt; it doubles with
	// each failure in a row up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Backfill: see Input.Backfill.
	Backfill bool
	// PartialGroup is how long a group may hold some but fewer than
	// min-available members bound while it is not admitted, before its
	// bound members are deleted so that it starts over whole; 0: never.
	PartialGroup time.Duration
	// Clock times backoffs and passes; nil is the real clock.
	Clock clock.WithDelayedExecution
}

// minInterval spaces passes, so that a burst of events makes one pass.
const minInterval = 10 * time.Millisecond

// refreshDelay is how soon a pass follows events that change no admission,
// only what the status shows (members bound or running) or the exact
// accounting of free resources (a pod in no group bound).
const refreshDelay = time.Second

// Queue admits pod groups. One Queue serves every profile of a scheduler;
// it covers the pods of the profiles that call Gate.
type Queue struct {
	groups   *podgroup.Groups
	gpus     *gpuledger.State
	opts     Options
	activate func(map[string]*corev1.Pod)

	pods   cache.Indexer
	nodes  corelisters.NodeLister
	quotas corelisters.ResourceQuotaLister
	status *statusWriter
	held   *podWriter
	evict  *evictor
	// source reads the team queues; queueStatus writes aisched Queues'
	// status (nil when their CRD is not served).
	source      *queueSource
	queueStatus *queueStatusWriter
	// history is each queue's decayed past use by resource name, kept
	// from pass to pass (and read back from the Queues' status after a
	// restart); historyAt is when it was brought up to date.
	history   map[string]map[string]int64
	historyAt time.Time
	// topologies reads the topologies groups ask for domains of.
	topologies *topology.Source
	// tree is the team queues as the last pass counted them; read-only.
	tree atomic.Pointer[queuetree.Tree]
	// reclaiming are the groups that took capacity back in the last pass,
	// and demands the pods' demands; both the loop's own.
	reclaiming map[string]bool
	demands    demandCache
	// dra and draFeatures solve groups' DRA claims (claims.go); dra is nil
	// without DRA.
	dra         fwk.SharedDRAManager
	draFeatures structured.Features
	// synced report whether the queue's handlers have seen what the
	// informers first listed.
	synced []cache.InformerSynced

	kick chan struct{}
	// refreshing is true while a delayed pass is pending.
	refreshing atomic.Bool
	plan       atomic.Pointer[Plan]
	// waiting is true when the last plan left groups queued: then any
	// freed or added capacity is worth a pass.
	waiting atomic.Bool
	// counting is true when the last pass had groups or team queues to
	// count a pod outside any group against: only then is such a pod's
	// binding worth a pass.
	counting atomic.Bool
	// state is where the loop is: loopWaiting for a kick, loopPassing or
	// loopSpacing passes (waiting on the clock).
	state atomic.Int32

	metrics *queueMetrics

	mu       sync.Mutex
	profiles map[string]bool
	admitted map[string]bool
	// admittedAt is when each admitted group was admitted, until
	// min-available of its members are bound.
	admittedAt map[string]time.Time
	failures   map[string]int
	backoff    map[string]time.Time
	// ended counts the members that succeeded or failed, by group.
	ended *endedPods
	// preempted are the groups a member of which a scheduler preempted
	// since the last pass.
	preempted map[string]bool
	// partialSince is when each group that holds some but fewer than
	// min-available members bound, and is not admitted, was first seen so.
	partialSince map[string]time.Time
	// started and completed count the passes.
	started, completed uint64
	// fences are the nodes Fence holds, with the capacity each was fenced
	// for; fenced are the pods it held off since the last pass, which the
	// next pass activates.
	fences map[string]fence
	fenced map[string]*corev1.Pod
}

type terminalCounts struct{ succeeded, failed int32 }

// New returns a queue that is not started; it places groups on the cards
// of the GPU ledger gpus.
func New(groups *podgroup.Groups, gpus *gpuledger.State, opts Options) *Queue {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Queue{
		groups:   groups,
		gpus:     gpus,
		opts:     opts,
		kick:     make(chan struct{}, 1),
		profiles: map[string]bool{},
		metrics:  newQueueMetrics(),
		admitted: map[string]bool{},
		failures: map[string]int{},
		backoff:  map[string]time.Time{},

		preempted:    map[string]bool{},
		admittedAt:   map[string]time.Time{},
		fences:       map[string]fence{},
		partialSince: map[string]time.Time{},
		fenced:       map[string]*corev1.Pod{},
	}
}

// ReportingController is the component the queue's events come from
// (their reportingController, what kubectl get events shows): the queue's
// own, whichever scheduler profile started it.
const ReportingController = "aisched-jobqueue"

// Connection is what Start connects a queue to: the scheduler's informers
// and clients.
type Connection struct {
	// Factory is the scheduler's informer factory.
	Factory informers.SharedInformerFactory
	// Client writes pods' conditions and deletes victims; Aisched writes
	// Queue statuses and reads Queues (nil: no team queues, as in a
	// simulator without them); Dynamic reads peers' queues (nil: none).
	Client  kubernetes.Interface
	Aisched versioned.Interface
	Dynamic dynamic.Interface
	// Recorder tells the pods held back why they wait (a recorder of
	// ReportingController).
	Recorder events.EventRecorder
	// Activate moves pods of newly admitted groups to the active queue.
	Activate func(map[string]*corev1.Pod)
	// DRA is the scheduler's DRA manager and DRAFeatures its allocator's
	// features, to solve groups' DRA claims whole (claims.go); nil: DRA
	// claims are not placed on paper.
	DRA         fwk.SharedDRAManager
	DRAFeatures structured.Features
}

// Start follows pods, nodes, ResourceQuotas, PodGroups, team queues and
// namespaces through the scheduler's informers and runs the admission
// loop until ctx ends. It is called once, by the scheduler's shared state
// (scheduler.Shared).
func (q *Queue) Start(ctx context.Context, conn Connection) error {
	factory, client, recorder, activate := conn.Factory, conn.Client, conn.Recorder, conn.Activate
	q.activate = activate
	q.dra, q.draFeatures = conn.DRA, conn.DRAFeatures
	podInformer := factory.Core().V1().Pods().Informer()
	q.pods = podInformer.GetIndexer()
	q.held = newPodWriter(client, recorder, q.pods, q.opts.Clock)
	q.evict = newEvictor(client, recorder, q.opts.Clock)
	q.evict.evicted = func(p Preemption, v *corev1.Pod) {
		if p.queueName != "" {
			r, _ := gpu.ParseRequest(v)
			q.metrics.reclaimEvict.WithLabelValues(p.queueName).Add(float64(r.TotalMilli()) / 1000)
		}
	}
	go q.held.run(ctx)
	ended, err := startEndedPods(ctx, client, q.refresh)
	if err != nil {
		return err
	}
	q.ended = ended
	q.nodes = factory.Core().V1().Nodes().Lister()
	quotaInformer := factory.Core().V1().ResourceQuotas().Informer()
	q.quotas = factory.Core().V1().ResourceQuotas().Lister()
	podsReg, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    q.podAdded,
		UpdateFunc: q.podUpdate,
		DeleteFunc: q.podDeleted,
	})
	if err != nil {
		return err
	}
	onWaiting := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { q.kickIfWaiting() },
		UpdateFunc: func(interface{}, interface{}) { q.kickIfWaiting() },
		DeleteFunc: func(interface{}) { q.kickIfWaiting() },
	}
	nodesReg, err := factory.Core().V1().Nodes().Informer().AddEventHandler(onWaiting)
	if err != nil {
		return err
	}
	quotasReg, err := quotaInformer.AddEventHandler(onWaiting)
	if err != nil {
		return err
	}
	// A pass places on the GPU ledger's cards and holdings: before the
	// ledger has seen the inventories and the bound pods, nodes would look
	// freer than they are.
	q.synced = []cache.InformerSynced{podsReg.HasSynced, nodesReg.HasSynced, quotasReg.HasSynced, q.gpus.HasSynced}
	q.source = &queueSource{}
	if err := q.source.start(ctx, conn.Aisched, conn.Dynamic, factory, q.Kick); err != nil {
		return fmt.Errorf("team queues: %w", err)
	}
	q.synced = append(q.synced, q.source.synced...)
	q.topologies = &topology.Source{}
	if err := q.topologies.Start(ctx, conn.Aisched, conn.Dynamic, q.nodes, q.Kick); err != nil {
		return fmt.Errorf("topologies: %w", err)
	}
	q.synced = append(q.synced, q.topologies.Synced()...)
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { q.topologies.NodesChanged() },
		UpdateFunc: func(old, obj interface{}) {
			if o, ok := old.(*corev1.Node); ok && !maps.Equal(o.Labels, obj.(*corev1.Node).Labels) {
				q.topologies.NodesChanged()
			}
		},
		DeleteFunc: func(interface{}) { q.topologies.NodesChanged() },
	}); err != nil {
		return err
	}
	if conn.Aisched != nil && q.source.aisched != nil {
		q.queueStatus = newQueueStatusWriter(conn.Aisched)
		go q.queueStatus.run(ctx)
	}
	if err := q.groups.OnPodGroup(func(string) { q.Kick() }); err != nil {
		return err
	}
	if lister, client, ok := q.groups.API(); ok {
		q.status = newStatusWriter(lister, client)
		go q.status.run(ctx)
	}
	go q.loop(ctx)
	return nil
}

// Kick asks for a pass.
func (q *Queue) Kick() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// refresh asks for a pass within refreshDelay.
func (q *Queue) refresh() {
	if q.refreshing.CompareAndSwap(false, true) {
		q.opts.Clock.AfterFunc(refreshDelay, func() {
			q.refreshing.Store(false)
			q.Kick()
		})
	}
}

// refreshIfCounting asks for a pass within refreshDelay if the last pass
// had something to count a pod outside any group against.
func (q *Queue) refreshIfCounting() {
	if q.counting.Load() {
		q.refresh()
	}
}

func (q *Queue) kickIfWaiting() {
	if q.waiting.Load() {
		q.Kick()
	}
}
