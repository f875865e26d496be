package jobqueue

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/queuetree"
	"github.com/aisched/aisched/pkg/topology"
)

// input gathers the state a plan depends on from the informers.
// Its third result preempts the rest of each group that lost a member to a
// scheduler's preemption and can no longer run as a group.
func (q *Queue) input(now time.Time) (Input, map[string]*Group, []Preemption) {
	q.mu.Lock()
	profiles := make(map[string]bool, len(q.profiles))
	for p := range q.profiles {
		profiles[p] = true
	}
	q.mu.Unlock()

	last := q.plan.Load()
	teams := q.source != nil && q.source.active()
	var singles []*corev1.Pod
	used := map[string]Resources{}
	cards := map[string]int64{}
	bound := map[string][]*corev1.Pod{}
	groups := map[string]*Group{}
	refs := map[string]podgroup.Ref{}
	q.mu.Lock()
	preempted := q.preempted
	q.preempted = map[string]bool{}
	q.mu.Unlock()
	for _, obj := range q.pods.List() {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		if pod.Spec.NodeName != "" {
			// The demand cache: reading requests of every bound pod anew
			// was a quarter of a pass's cost (4-pod gangs, 1,000 nodes).
			d := q.demands.of(pod)
			used[pod.Spec.NodeName] = used[pod.Spec.NodeName].Add(d.Request)
			cards[pod.Spec.NodeName] += d.requested
			bound[pod.Spec.NodeName] = append(bound[pod.Spec.NodeName], pod)
		}
		if pod.DeletionTimestamp != nil || !profiles[pod.Spec.SchedulerName] {
			continue
		}
		key, ok := podgroup.KeyOf(pod)
		if !ok {
			if pod.Spec.NodeName == "" && teams {
				singles = append(singles, pod)
			}
			continue
		}
		g := groups[key]
		if g == nil {
			ref, ok, err := q.groups.Of(pod)
			if !ok || err != nil || ref.MinAvailable < 2 {
				// A group of one is a pod alone to the queue; an invalid
				// group is PreFilter's to name.
				if ok && err == nil && pod.Spec.NodeName == "" && teams {
					singles = append(singles, pod)
				}
				continue
			}
			g = &Group{Key: key, Namespace: pod.Namespace, MinAvailable: ref.MinAvailable, MinResources: ref.MinResources,
				Created: ref.Created, Priority: corev1helpers.PodPriority(pod), Queued: q.queued(last, ref)}
			groups[key] = g
			refs[key] = ref
		}
		g.Priority = max(g.Priority, corev1helpers.PodPriority(pod))
		if ref := pod.CreationTimestamp.Time; g.Created.IsZero() || ref.Before(g.Created) {
			g.Created = ref
		}
		if pod.Spec.NodeName != "" {
			g.Bound = append(g.Bound, pod)
		} else {
			g.Pending = append(g.Pending, pod)
		}
	}

	for _, g := range groups {
		g.HeldClaims = q.heldClaims(g.Pending)
	}
	in := Input{Now: now, Backfill: q.opts.Backfill, Quotas: map[string][]Quota{}, DemandOf: q.demands.of, Claims: q.claimSolver(groups)}
	if q.topologies != nil {
		in.Topologies = q.topologies.Topologies()
	}
	for key, g := range groups {
		g.Constraint, g.ConstraintProblem = constraintOf(g, refs[key])
	}
	if last != nil {
		in.LastReservation = last.Reservation
	}
	nodes, _ := q.nodes.List(labels.Everything())
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		alloc := allocatable(n)
		in.Rooms = append(in.Rooms, Room{Node: n, Allocatable: alloc, Free: alloc.Sub(used[n.Name]), GPUs: q.gpus.NodeGPUs(n, bound[n.Name], cards[n.Name]), Pods: bound[n.Name]})
	}
	if teams {
		q.teams(&in, groups, singles, bound, last)
	}
	q.mu.Lock()
	for key, g := range groups {
		g.Succeeded = int(q.ended.counts(key).succeeded)
		g.Admitted = q.admitted[key]
		if last != nil {
			g.Placed = last.Placements[key]
		}
		g.BackoffUntil = q.backoff[key]
		in.Groups = append(in.Groups, *g)
		if _, ok := in.Quotas[g.Namespace]; !ok {
			in.Quotas[g.Namespace] = q.quotasIn(g.Namespace)
		}
	}
	q.mu.Unlock()
	var broken []Preemption
	for key := range preempted {
		// The rest of a group that can no longer run as one goes too: a
		// gang is preempted whole (upstream's preemption takes pods one
		// by one).
		if g := groups[key]; g != nil && len(g.Bound) > 0 && len(g.Bound)+g.Succeeded < g.MinAvailable {
			broken = append(broken, Preemption{Group: key, Priority: g.Priority, Victims: g.Bound, brokenGroup: true})
		}
	}
	return in, groups, broken
}

// teams builds the pass's tree of team queues into in, names the leaf
// queue of every group and of the running work, and adds a group of one
// for each pending pod in no group that a queue accounts.
func (q *Queue) teams(in *Input, groups map[string]*Group, singles []*corev1.Pod, bound map[string][]*corev1.Pod, last *Plan) {
	specs, _, _ := q.source.read()
	specs = q.withHistory(specs)
	tree, problems := queuetree.Build(specs, capacityOf(in.Rooms))
	in.Queues, in.QueueOf, in.QueueProblems = tree, map[string]string{}, problems
	leaf := func(pod *corev1.Pod) (string, string) {
		name, problem := q.source.queueOf(pod)
		if name != "" {
			if p := leafProblem(tree, name); p != "" {
				return "", p
			}
		}
		return name, problem
	}
	for _, pods := range bound {
		for _, p := range pods {
			key := unitKey(p)
			if _, done := in.QueueOf[key]; !done {
				in.QueueOf[key], _ = leaf(p)
			}
		}
	}
	for _, g := range groups {
		first := g.Pending
		if len(first) == 0 {
			first = g.Bound
		}
		g.Queue, g.QueueProblem = leaf(first[0])
	}
	for _, p := range singles {
		name, problem := leaf(p)
		if name == "" && problem == "" {
			continue
		}
		key := singleKey(p)
		g := &Group{Key: key, Namespace: p.Namespace, MinAvailable: 1, Priority: corev1helpers.PodPriority(p),
			Created: p.CreationTimestamp.Time, Pending: []*corev1.Pod{p}, Queue: name, QueueProblem: problem, Single: true}
		if last != nil {
			g.Queued = last.Decisions[key].Position
		}
		groups[key] = g
	}
}

// withHistory gives each queue with a half-life the usage history the
// queue keeps from pass to pass; a queue it has none of yet (after a
// restart) keeps what its status recorded.
func (q *Queue) withHistory(specs []queuetree.Spec) []queuetree.Spec {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := slices.Clone(specs)
	for i := range out {
		if h, ok := q.history[out[i].Name]; ok && out[i].HalfLife > 0 {
			out[i].History = h
		}
	}
	return out
}

// demandCache remembers pods' demands from pass to pass: reading a
// demand (requests, the GPU request's annotations) costs more than the
// rest of a pass for a pod that waits. A pod's entry stays valid while its
// resourceVersion does; entries of pods no pass asked for are dropped. It
// is used by the loop's goroutine only.
type demandCache struct {
	entries map[types.UID]cachedDemand
	used    map[types.UID]bool
}

type cachedDemand struct {
	version string
	demand  Demand
}

func (c *demandCache) of(p *corev1.Pod) Demand {
	if c.entries == nil {
		c.entries, c.used = map[types.UID]cachedDemand{}, map[types.UID]bool{}
	}
	c.used[p.UID] = true
	if e, ok := c.entries[p.UID]; ok && e.version == p.ResourceVersion && e.demand.Pod == p {
		return e.demand
	}
	d := DemandOf(p)
	c.entries[p.UID] = cachedDemand{version: p.ResourceVersion, demand: d}
	return d
}

// sweep drops the entries of pods the last pass did not ask for.
func (c *demandCache) sweep() {
	for uid := range c.entries {
		if !c.used[uid] {
			delete(c.entries, uid)
		}
	}
	clear(c.used)
}

// queued returns the place the queue last gave the group ref: in the last
// plan, or, before the first (a scheduler that just started or took over
// as leader), the place its PodGroup's status recorded.
func (q *Queue) queued(last *Plan, ref podgroup.Ref) int {
	if last != nil {
		return last.Decisions[ref.Key()].Position
	}
	lister, _, ok := q.groups.API()
	if !ok {
		return 0
	}
	pg, err := lister.PodGroups(ref.Namespace).Get(ref.Name)
	if err != nil {
		return 0
	}
	return int(pg.Status.QueuePosition)
}

func (q *Queue) quotasIn(namespace string) []Quota {
	list, _ := q.quotas.ResourceQuotas(namespace).List(labels.Everything())
	out := make([]Quota, 0, len(list))
	for _, rq := range list {
		out = append(out, Quota{Name: rq.Name, Hard: rq.Spec.Hard, Used: rq.Status.Used})
	}
	return out
}

func allocatable(n *corev1.Node) Resources {
	a := n.Status.Allocatable
	return Resources{MilliCPU: a.Cpu().MilliValue(), Memory: a.Memory().Value(), Pods: a.Pods().Value()}
}

// constraintOf reads what a group asks of a topology: its PodGroup's
// (annotations, or a Volcano PodGroup's networkTopology), else its
// members', which must agree. The problem names the key, and the pod.
func constraintOf(g *Group, ref podgroup.Ref) (topology.Constraint, string) {
	if c, ok, err := topology.OfPodGroup(ref.Annotations, ref.Volcano); err != nil {
		return topology.Constraint{}, fmt.Sprintf("PodGroup %s: %s", ref.Key(), err)
	} else if ok {
		return c, ""
	}
	var c topology.Constraint
	var from *corev1.Pod
	for _, pods := range [][]*corev1.Pod{g.Pending, g.Bound} {
		for _, p := range pods {
			pc, _, err := topology.OfPod(p)
			if err != nil {
				return topology.Constraint{}, fmt.Sprintf("pod %s: %s", p.Name, err)
			}
			if from == nil {
				c, from = pc, p
				continue
			}
			if pc != c {
				return topology.Constraint{}, fmt.Sprintf("pods %s and %s ask for different topology domains; give every member the same annotations", from.Name, p.Name)
			}
		}
	}
	return c, ""
}
