// Package whatif answers "would this job fit now, where, and if not, what
// would have to happen first" for a live cluster, without touching it:
// it reads a snapshot (Take), starts the simulator's fast engine from it
// with the cluster's own scheduler configuration (the real scheduler, its
// plugins and job queue), adds the job's pods and PodGroups, and watches
// what the scheduler does. When the job does not fit now, it lets the
// running pods whose end is known end, in the order of their ends, until
// it fits; and it tries the job on the cluster emptied of pods, to tell a
// job that must wait from one that can never run.
package whatif

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/simcluster"
)

// Verdicts, from the best to the worst.
const (
	// FitsNow: every pod of the job is placed at once.
	FitsNow = "FitsNow"
	// FitsAfterPreemption: the job is placed once the scheduler has
	// preempted the pods listed (it has a higher priority).
	FitsAfterPreemption = "FitsAfterPreemption"
	// FitsLater: the job is placed once the running pods listed end, at
	// the time given.
	FitsLater = "FitsLater"
	// NotWithinHorizon: the job would fit the cluster emptied of pods, but
	// not after every pod whose end is known ended within the horizon:
	// it waits for pods whose end nothing says.
	NotWithinHorizon = "NotWithinHorizon"
	// NeverFits: the job does not fit even with every pod gone.
	NeverFits = "NeverFits"
)

// Options configure Run.
type Options struct {
	// SchedulerConfig is the cluster's scheduler configuration.
	SchedulerConfig *config.KubeSchedulerConfiguration
	// SharedConfig is its shared configuration; nil: defaults.
	SharedConfig *aischedconfig.SharedConfiguration
	// Horizon bounds how far ahead running pods are let end; default
	// DefaultHorizon.
	Horizon time.Duration
}

// DefaultHorizon is how far ahead Run looks unless told.
const DefaultHorizon = 7 * 24 * time.Hour

// settleStep is the simulated time given to the scheduler after each
// change: its retries, the job queue's passes and gang members' Permit
// waits complete within it.
const settleStep = 10 * time.Second

// Answer is what Run found.
type Answer struct {
	Verdict string `json:"verdict"`
	// Pods are the job's pods with where they go (Node empty when they
	// do not), in the manifests' order.
	Pods []Placement `json:"pods"`
	// Preempted are the running pods the scheduler preempted for the job.
	Preempted []string `json:"preempted,omitempty"`
	// At is when the job fits, with FitsLater; After the running pods
	// that must end first.
	At    *time.Time `json:"at,omitempty"`
	After []string   `json:"after,omitempty"`
	// Waiting says why pods wait now (their PodScheduled condition, or the
	// job queue's decision for their group), one line each.
	Waiting []string `json:"waiting,omitempty"`
	// Domains are the topology domains the job's pod groups are placed
	// in, for groups that ask for one (docs/topology.md).
	Domains []Domain `json:"domains,omitempty"`
	// Never says why the job does not fit an empty cluster (NeverFits),
	// and PlacedOnEmpty how many of its pods were placed there.
	Never         []string `json:"never,omitempty"`
	PlacedOnEmpty int      `json:"placedOnEmpty,omitempty"`
	// Submitted is what the cluster has of the job and says of it, when
	// it was submitted already; the job's pods are then the cluster's.
	Submitted *Submitted `json:"submitted,omitempty"`
	// Queue is what the team queues say of the job; nil when it is in no
	// queue.
	Queue *QueueAnswer `json:"queue,omitempty"`
}

// Domain is where the job queue placed one of the job's pod groups.
type Domain struct {
	Group string `json:"group"`
	// Domain is the level's node label and the value
	// ("example.com/rack=r3"), Words what the queue says of it ("inside
	// rack r3", with the preferred level's best try when it fell back).
	Domain string `json:"domain,omitempty"`
	Words  string `json:"words"`
}

// Placement is where one pod of the job goes.
type Placement struct {
	Pod   string `json:"pod"`
	Node  string `json:"node,omitempty"`
	Cards []int  `json:"cards,omitempty"`
	// UUIDs are the cards' UUIDs, when the node's inventory has them.
	UUIDs []string `json:"uuids,omitempty"`
}

// Run places the job on a simulation of the snapshot. A job the cluster
// has already (some of its pods, or its PodGroup) is read as itself
// (resolve): its pods are the cluster's, bound or not, and the answer
// says what the cluster says of it.
func Run(ctx context.Context, snap *Snapshot, job *Job, opts Options) (_ *Answer, err error) {
	if opts.Horizon <= 0 {
		opts.Horizon = DefaultHorizon
	}
	job, submitted, err := job.resolve(snap)
	if err != nil {
		return nil, err
	}
	c, err := start(ctx, snap.Taken, snap.Core, snap.Aisched, opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, c.Stop()) }()
	// The pods there are now: a job already submitted may preempt some
	// while the cluster's pending pods get their turn.
	before, err := podKeys(ctx, c)
	if err != nil {
		return nil, err
	}
	// The cluster's own pending pods come first, as they would.
	if err := c.RunUntil(ctx, c.Now().Add(settleStep)); err != nil {
		return nil, err
	}
	if submitted == nil {
		// Pods that ended in that step were not preempted for the job.
		if before, err = podKeys(ctx, c); err != nil {
			return nil, err
		}
	}
	// The team queues as they stand before the job.
	queues := c.Queues()
	if err := submit(ctx, c, job, false); err != nil {
		return nil, err
	}
	if err := c.RunUntil(ctx, c.Now().Add(settleStep)); err != nil {
		return nil, err
	}
	ans := &Answer{Submitted: submitted}
	placed, err := observe(ctx, c, job, ans)
	if err != nil {
		return nil, err
	}
	after, err := podKeys(ctx, c)
	if err != nil {
		return nil, err
	}
	for k := range before {
		if !after[k] {
			ans.Preempted = append(ans.Preempted, k)
		}
	}
	slices.Sort(ans.Preempted)
	ans.Queue = queueOf(c, queues, c.Queues(), job, ans.Preempted, snap)
	switch {
	case placed && len(ans.Preempted) > 0:
		ans.Verdict = FitsAfterPreemption
		return ans, nil
	case placed:
		ans.Verdict = FitsNow
		return ans, nil
	}
	ans.Waiting = waiting(ctx, c, job)

	if fits, err := lookAhead(ctx, c, snap, job, opts.Horizon, ans); err != nil || fits {
		return ans, err
	}
	never, placedEmpty, err := tryEmpty(ctx, snap, job, opts)
	if err != nil {
		return nil, err
	}
	if len(never) > 0 {
		ans.Verdict, ans.Never, ans.PlacedOnEmpty = NeverFits, never, placedEmpty
	} else {
		ans.Verdict = NotWithinHorizon
	}
	return ans, nil
}

// lookAhead lets the running pods with a known end end, in order, until
// the job fits; it reports whether it did.
func lookAhead(ctx context.Context, c *simulation, snap *Snapshot, job *Job, horizon time.Duration, ans *Answer) (bool, error) {
	type ending struct {
		at  time.Time
		pod *corev1.Pod
	}
	var ends []ending
	for _, p := range snap.Pods {
		if job.existing[p.Namespace+"/"+p.Name] {
			continue // the job's own
		}
		if at, ok := expectedEnd(p); ok && at.Before(snap.Taken.Add(horizon)) {
			ends = append(ends, ending{at, p})
		}
	}
	sort.SliceStable(ends, func(i, j int) bool { return ends[i].at.Before(ends[j].at) })
	var ended []string
	for i := 0; i < len(ends); {
		at := ends[i].at
		if at.After(c.Now()) {
			if err := c.RunUntil(ctx, at); err != nil {
				return false, err
			}
		}
		for ; i < len(ends) && !ends[i].at.After(at); i++ {
			p := ends[i].pod
			err := c.Client().CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
			ended = append(ended, p.Namespace+"/"+p.Name)
		}
		if err := c.RunUntil(ctx, c.Now().Add(settleStep)); err != nil {
			return false, err
		}
		fits := &Answer{}
		placed, err := observe(ctx, c, job, fits)
		if err != nil {
			return false, err
		}
		if placed {
			ans.Verdict, ans.Pods, ans.After = FitsLater, fits.Pods, ended
			ans.At = &at
			return true, nil
		}
	}
	return false, nil
}

// tryEmpty places the job on the snapshot's nodes with no pod running and
// returns why it does not fit there, nil when it does, and how many of its
// pods were placed there.
func tryEmpty(ctx context.Context, snap *Snapshot, job *Job, opts Options) (_ []string, placedPods int, err error) {
	var core []runtime.Object
	for _, o := range snap.Core {
		if _, isPod := o.(*corev1.Pod); !isPod {
			core = append(core, o)
		}
	}
	c, err := start(ctx, snap.Taken, core, snap.Aisched, opts)
	if err != nil {
		return nil, 0, err
	}
	defer func() { err = errors.Join(err, c.Stop()) }()
	if err := submit(ctx, c, job, true); err != nil {
		return nil, 0, err
	}
	if err := c.RunUntil(ctx, c.Now().Add(settleStep)); err != nil {
		return nil, 0, err
	}
	there := &Answer{}
	placed, err := observe(ctx, c, job, there)
	if err != nil || placed {
		return nil, len(there.Pods), err
	}
	return waiting(ctx, c, job), len(there.placed()), nil
}

// simulation is a snapshot's simulated cluster, with the observer of its
// pods.
type simulation struct {
	simcluster.SnapshotCluster
	pods *simcluster.PodObserver
}

// start starts the simulation of the objects, its clock at now.
func start(ctx context.Context, now time.Time, core, aisched []runtime.Object, opts Options) (*simulation, error) {
	c, err := simcluster.StartSnapshot(ctx, now, core, aisched, simcluster.Options{SchedulerConfig: opts.SchedulerConfig, SharedConfig: opts.SharedConfig})
	if err != nil {
		return nil, err
	}
	pods, err := simcluster.ObservePods(ctx, c, nil)
	if err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return &simulation{SnapshotCluster: c, pods: pods}, nil
}

// Stop stops the observer and the cluster.
func (s *simulation) Stop() error {
	s.pods.Stop()
	return s.SnapshotCluster.Stop()
}

// jobPods are the job's pods as the simulation has them now, in the job's
// order; nil for a pod that cannot be read (deleted), and the first such
// error.
func (s *simulation) jobPods(ctx context.Context, job *Job) ([]*corev1.Pod, error) {
	out := make([]*corev1.Pod, len(job.Pods))
	var first error
	for i, p := range job.Pods {
		key := p.Namespace + "/" + p.Name
		// Read now, not as the watch brings it: the clock has just stopped.
		if err := s.pods.Refresh(ctx, key); err != nil {
			first = cmp.Or(first, err)
			continue
		}
		seen, _ := s.pods.Pod(key)
		out[i] = seen.Pod
	}
	return out, first
}

// submit creates the job's PodGroups and pods, and counts them in their
// namespaces' ResourceQuotas as the quota controller would
// (jobqueue.QuotaUsage, which the job queue admits against). The pods the
// cluster has already are in the simulation as they are, and counted in
// the quotas, unless empty: the simulation has none of the cluster's
// pods, and they are created unbound.
func submit(ctx context.Context, c simcluster.Cluster, job *Job, empty bool) error {
	for _, g := range job.PodGroups {
		if _, err := c.Aisched().SchedulingV1alpha1().PodGroups(g.Namespace).Create(ctx, g.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("PodGroup %s/%s: %w", g.Namespace, g.Name, err)
		}
	}
	used := map[string]corev1.ResourceList{}
	for _, p := range job.Pods {
		if job.existing[p.Namespace+"/"+p.Name] {
			if empty {
				if _, err := c.Client().CoreV1().Pods(p.Namespace).Create(ctx, unbound(p), metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
				}
			}
			continue
		}
		if _, err := c.Client().CoreV1().Pods(p.Namespace).Create(ctx, p.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		used[p.Namespace] = quota.Add(used[p.Namespace], jobqueue.QuotaUsage(p))
	}
	for ns, sum := range used {
		quotas, err := c.Client().CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range quotas.Items {
			q := &quotas.Items[i]
			q.Status.Used = quota.Add(q.Status.Used, quota.Mask(sum, quota.ResourceNames(q.Spec.Hard)))
			if _, err := c.Client().CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// observe fills ans.Pods with where the job's pods are, and reports
// whether every one is placed.
func observe(ctx context.Context, c *simulation, job *Job, ans *Answer) (bool, error) {
	pods, err := c.jobPods(ctx, job)
	if err != nil {
		return false, err
	}
	all := true
	ans.Pods = ans.Pods[:0]
	for _, p := range pods {
		pl := Placement{Pod: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName}
		if cards, ok := gpu.ParseIndices(p.Annotations[gpu.AssignedAnnotation]); ok {
			pl.Cards = cards
		}
		if uuids := p.Annotations[gpu.AssignedUUIDsAnnotation]; uuids != "" {
			pl.UUIDs = strings.Split(uuids, ",")
		}
		all = all && p.Spec.NodeName != ""
		ans.Pods = append(ans.Pods, pl)
	}
	ans.Domains = domains(c, job)
	return all, nil
}

// domains are the topology domains the job queue placed the job's groups
// in.
func domains(c simcluster.Cluster, job *Job) []Domain {
	sc, ok := c.(simcluster.SnapshotCluster)
	if !ok {
		return nil
	}
	var out []Domain
	seen := map[string]bool{}
	for _, p := range job.Pods {
		key, ok := podgroup.KeyOf(p)
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		if placed := sc.QueuePlaced(key); placed != nil {
			out = append(out, Domain{Group: key, Domain: placed.Selector, Words: placed.Why})
		}
	}
	return out
}

// waiting says why the job's unplaced pods wait: the job queue's decision
// for each group, and each pod's PodScheduled condition; pods that say the
// same share a line.
func waiting(ctx context.Context, c *simulation, job *Job) []string {
	var out []string
	seen := map[string]bool{}
	var says sayings
	// A pod gone (deleted meanwhile) does not wait.
	pods, _ := c.jobPods(ctx, job)
	for _, p := range pods {
		if p == nil || p.Spec.NodeName != "" {
			continue
		}
		if key, ok := podgroup.KeyOf(p); ok && !seen[key] {
			seen[key] = true
			if d, ok := c.QueueDecision(key); ok && !d.Admitted {
				line := fmt.Sprintf("pod group %s: %s: %s", key, d.Reason, d.Message)
				if d.Position > 0 {
					line = fmt.Sprintf("pod group %s: %s, position %d in the queue: %s", key, d.Reason, d.Position, d.Message)
				}
				out = append(out, line)
			}
		}
		if why := simcluster.NotScheduled(p); why != nil {
			says.add(p, why.Reason+": "+why.Message)
		}
	}
	return append(out, says.lines()...)
}

// expectedEnd is when a running pod is expected to end: its start plus
// its run duration (a simulated pod's nodesim.RunDurationAnnotation), or
// plus spec.activeDeadlineSeconds, after which the kubelet ends it. ok is
// false when nothing says.
func expectedEnd(p *corev1.Pod) (time.Time, bool) {
	if p.Spec.NodeName == "" || p.Status.StartTime == nil {
		return time.Time{}, false
	}
	start := p.Status.StartTime.Time
	if v, ok := p.Annotations[nodesim.RunDurationAnnotation]; ok {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return start.Add(d), true
		}
	}
	if s := p.Spec.ActiveDeadlineSeconds; s != nil && *s > 0 {
		return start.Add(time.Duration(*s) * time.Second), true
	}
	return time.Time{}, false
}

// podKeys lists the cluster's pods by namespace/name.
func podKeys(ctx context.Context, c simcluster.Cluster) (map[string]bool, error) {
	list, err := c.Client().CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(list.Items))
	for _, p := range list.Items {
		out[p.Namespace+"/"+p.Name] = true
	}
	return out, nil
}
