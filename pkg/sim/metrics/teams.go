package metrics

import (
	"cmp"
	"slices"
	"time"

	"github.com/aisched/aisched/pkg/queuetree"
	"github.com/aisched/aisched/pkg/util/percentile"
)

// Teams follows the jobs of a cluster shared by teams through a run, from
// the events the runner observes, and measures how the cluster served
// them, in cards: the cards held over time, each team's cards against its
// fair share, how long work within a team's guarantee waited, the cards
// evicted for the cards taken back, the cards left idle while a job that
// they would hold waits, and the jobs that never started.
//
// A team is a leaf of the scenario's queues; its fair share at a moment
// is queuetree's (FairShares) of that moment's use and waiting demand, of
// nvidia.com/gpu only. The same measure serves runs that admit by queue
// and runs that cap each team with a ResourceQuota: the teams and their
// fair shares are the scenario's either way.
//
// A job is a pod group (or a pod in no group): it arrives with its first
// member and starts when min-available members are bound. The state
// between two events is constant and counts for the time it lasts; for
// the largest deviation and the idle cards, only states that last
// minLasting or longer count: a pass of the job queue, a gang's members
// binding one after the other, last milliseconds, and are the runner's
// view rather than the cluster's. Events must come in time order (a late
// one counts from the last event's time). The zero value is not ready for
// use; use NewTeams. Teams is not safe for concurrent use.
type Teams struct {
	specs    []queuetree.Spec
	capacity int64
	// nodes are the cards of each node, in thousandths.
	nodes map[string]int64
	// from and to are the window of MeanGPUAllocationRate.
	from, to time.Time
	// minLasting is how long a state must last to count for the largest
	// deviation and the idle cards.
	minLasting time.Duration

	jobs  map[string]*teamJob
	order []*teamJob
	pods  map[string]*teamPod

	started bool
	first   time.Time
	now     time.Time
	dirty   bool
	// The state since now: cards held, by team and in all; each team's
	// fair share; the cards idle while a job they would hold waits.
	used     map[string]int64
	fair     map[string]int64
	held     int64
	idleFits int64

	// Integrals, in thousandths of a card times seconds, and maxima.
	heldInWindow float64
	deviation    map[string]float64
	maxDeviation int64
	idle         float64

	evicted int64
	takers  map[string]bool
	waits   []float64
}

type teamJob struct {
	key, team    string
	arrived      time.Time
	minAvailable int
	members      []*teamPod
	// within: when it gathered min-available members, its team's use,
	// its team's earlier waiting work and its own need stayed within the
	// team's guarantee.
	within, complete  bool
	started, censored bool
}

type teamPod struct {
	job          *teamJob
	gpu          int64
	node         string
	bound, ended bool
	evicted      bool
}

// NewTeams follows the teams of specs (the scenario's queues) on nodes
// with the given cards (thousandths, by node name); MeanGPUAllocationRate
// is measured from from to to, and states shorter than minLasting do not
// count for the largest deviation and the idle cards.
func NewTeams(specs []queuetree.Spec, nodes map[string]int64, from, to time.Time, minLasting time.Duration) *Teams {
	t := &Teams{nodes: nodes, from: from, to: to, minLasting: minLasting, jobs: map[string]*teamJob{}, pods: map[string]*teamPod{},
		used: map[string]int64{}, fair: map[string]int64{}, deviation: map[string]float64{}, takers: map[string]bool{}}
	for _, s := range specs {
		gpuOnly := s
		gpuOnly.Resources = map[string]queuetree.Amounts{}
		if a, ok := s.Resources[queuetree.GPU]; ok {
			gpuOnly.Resources[queuetree.GPU] = a
		}
		t.specs = append(t.specs, gpuOnly)
	}
	for _, c := range nodes {
		t.capacity += c
	}
	return t
}

// Arrive records that pod, a member of job (a pod group's key, or the
// pod's own for a pod in no group) of team, asking gpuMilli thousandths of
// cards, was submitted at at. A pod submitted again (after a refusal) is
// the same pod.
func (t *Teams) Arrive(at time.Time, pod, job, team string, gpuMilli int64, minAvailable int) {
	if _, ok := t.pods[pod]; ok {
		return
	}
	t.advance(at)
	j, ok := t.jobs[job]
	if !ok {
		j = &teamJob{key: job, team: team, arrived: at, minAvailable: max(minAvailable, 1)}
		t.jobs[job] = j
		t.order = append(t.order, j)
	}
	p := &teamPod{job: j, gpu: gpuMilli}
	t.pods[pod] = p
	j.members = append(j.members, p)
	if !j.complete && len(j.members) >= j.minAvailable {
		j.complete = true
		j.within = t.withinGuarantee(j)
	}
	t.dirty = true
}

// Bind records that pod was bound to node at at.
func (t *Teams) Bind(at time.Time, pod, node string) {
	p, ok := t.pods[pod]
	if !ok || p.bound || p.ended {
		return
	}
	t.advance(at)
	p.bound, p.node = true, node
	if j := p.job; !j.started && j.bound() >= j.minAvailable {
		j.started = true
		if j.within {
			t.waits = append(t.waits, at.Sub(j.arrived).Seconds())
		}
	}
	t.dirty = true
}

// Evict records that pod was evicted at at to take capacity back for the
// job taker ("" when not for a team queue): its cards count as evicted
// once.
func (t *Teams) Evict(at time.Time, pod, taker string) {
	p, ok := t.pods[pod]
	if !ok || p.evicted || !p.bound || p.ended || taker == "" {
		return
	}
	t.advance(at)
	p.evicted = true
	t.evicted += p.gpu
	t.takers[taker] = true
}

// End records that pod ended, or was deleted, at at.
func (t *Teams) End(at time.Time, pod string) {
	p, ok := t.pods[pod]
	if !ok || p.ended {
		return
	}
	t.advance(at)
	p.ended = true
	t.dirty = true
}

// Finish ends the run at at: jobs within their guarantees that never
// started count as waiting until then.
func (t *Teams) Finish(at time.Time) {
	t.advance(at)
	for _, j := range t.order {
		if j.within && !j.started && !j.censored {
			j.censored = true
			t.waits = append(t.waits, at.Sub(j.arrived).Seconds())
		}
	}
}

// withinGuarantee reports whether job j, complete now, stays within its
// team's guarantee with what the team holds and its earlier complete jobs
// that wait.
func (t *Teams) withinGuarantee(j *teamJob) bool {
	guaranteed, ok := t.guarantee(j.team)
	if !ok {
		return false
	}
	want := j.need()
	for _, p := range t.pods {
		if p.job.team == j.team && p.bound && !p.ended {
			want += p.gpu
		}
	}
	for _, o := range t.order {
		if o != j && o.team == j.team && o.complete && !o.started {
			want += o.need()
		}
	}
	return want <= guaranteed && j.need() > 0
}

// guarantee is team's guarantee of cards, in thousandths.
func (t *Teams) guarantee(team string) (int64, bool) {
	for _, s := range t.specs {
		if s.Name == team {
			a, ok := s.Resources[queuetree.GPU]
			return a.Guaranteed, ok
		}
	}
	return 0, false
}

// bound counts the job's members bound and not ended.
func (j *teamJob) bound() int {
	n := 0
	for _, p := range j.members {
		if p.bound && !p.ended {
			n++
		}
	}
	return n
}

// need is what the job's min-available largest members ask of cards.
func (j *teamJob) need() int64 {
	gpus := make([]int64, len(j.members))
	for i, p := range j.members {
		gpus[i] = p.gpu
	}
	slices.SortFunc(gpus, func(a, b int64) int { return cmp.Compare(b, a) })
	var sum int64
	for _, g := range gpus[:min(j.minAvailable, len(gpus))] {
		sum += g
	}
	return sum
}

// advance counts the state since the last event up to at.
func (t *Teams) advance(at time.Time) {
	if !t.started {
		t.started, t.first, t.now = true, at, at
	}
	if !at.After(t.now) {
		return
	}
	if t.dirty {
		t.measure()
	}
	dt := at.Sub(t.now).Seconds()
	if lo, hi := Later(t.now, t.from), Earlier(at, t.to); hi.After(lo) {
		t.heldInWindow += float64(t.held) * hi.Sub(lo).Seconds()
	}
	lasted := at.Sub(t.now) >= t.minLasting
	for team, f := range t.fair {
		d := abs(t.used[team] - f)
		t.deviation[team] += float64(d) * dt
		if lasted {
			t.maxDeviation = max(t.maxDeviation, d)
		}
	}
	if lasted {
		t.idle += float64(t.idleFits) * dt
	}
	t.now = at
}

// measure computes the state after the events of this instant.
func (t *Teams) measure() {
	t.dirty = false
	clear(t.used)
	clear(t.fair)
	t.held = 0
	free := make(map[string]int64, len(t.nodes))
	for n, c := range t.nodes {
		free[n] = c
	}
	waiting := map[string]int64{}
	for _, p := range t.pods {
		switch {
		case p.ended:
		case p.bound:
			t.used[p.job.team] += p.gpu
			t.held += p.gpu
			free[p.node] -= p.gpu
		default:
			waiting[p.job.team] += p.gpu
		}
	}
	tree, _ := queuetree.Build(t.specs, map[string]int64{queuetree.GPU: t.capacity})
	for _, q := range tree.Queues() {
		if !q.Leaf() || q.Invalid() != "" {
			continue
		}
		d := queuetree.Vec{t.used[q.Name]}
		tree.Charge(q, d)
		tree.Wait(q, queuetree.Vec{waiting[q.Name]})
	}
	tree.FairShares()
	for _, q := range tree.Queues() {
		if q.Leaf() && q.Invalid() == "" && len(tree.Names()) == 1 {
			t.fair[q.Name] = q.FairShare()[0]
		}
	}
	t.idleFits = t.fitting(free)
}

// fitting is what the waiting jobs that would fit the free cards hold:
// in the order they arrived, each job not started whose members missing
// to min-available (the largest first) fit the free cards of single
// nodes, first fit, takes them.
func (t *Teams) fitting(free map[string]int64) int64 {
	nodes := make([]string, 0, len(free))
	for n := range free {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	var held int64
	for _, j := range t.order {
		if j.started || !j.complete {
			continue
		}
		var missing []int64
		for _, p := range j.members {
			if !p.bound && !p.ended {
				missing = append(missing, p.gpu)
			}
		}
		slices.SortFunc(missing, func(a, b int64) int { return cmp.Compare(b, a) })
		missing = missing[:min(max(j.minAvailable-j.bound(), 0), len(missing))]
		var need int64
		for _, g := range missing {
			need += g
		}
		if need == 0 {
			continue
		}
		trial := make(map[string]int64, len(free))
		for n, f := range free {
			trial[n] = f
		}
		fits := true
		for _, g := range missing {
			k := slices.IndexFunc(nodes, func(n string) bool { return trial[n] >= g })
			if k < 0 {
				fits = false
				break
			}
			trial[nodes[k]] -= g
		}
		if fits {
			free = trial
			held += need
		}
	}
	return held
}

// Fill sets the teams' metrics of r from what Teams measured; call
// Finish first.
func (t *Teams) Fill(r *Result) {
	if window := t.to.Sub(t.from).Seconds(); window > 0 && t.capacity > 0 {
		v := t.heldInWindow / (float64(t.capacity) * window)
		r.MeanGPUAllocationRate = &v
	}
	if elapsed := t.now.Sub(t.first).Seconds(); elapsed > 0 && len(t.deviation) > 0 {
		var worst float64
		for _, d := range t.deviation {
			worst = max(worst, d/elapsed)
		}
		r.FairShareDeviationGPUs = &Deviation{Mean: worst / 1000, Max: float64(t.maxDeviation) / 1000}
	}
	if len(t.waits) > 0 {
		sorted := slices.Clone(t.waits)
		slices.Sort(sorted)
		r.GuaranteeWaitSeconds = &Tail{P50: percentile.NearestRank(sorted, 500), P99: percentile.NearestRank(sorted, 990)}
	}
	var taken int64
	for key := range t.takers {
		if j, ok := t.jobs[key]; ok {
			taken += j.need()
		}
	}
	if taken > 0 {
		v := float64(t.evicted) / float64(taken)
		r.EvictedPerReclaimedGPU = &v
	}
	idle := t.idle / 1000 / 3600
	r.IdleGPUHoursWhileFitWaits = &idle
	never := 0
	for _, j := range t.order {
		if !j.started {
			never++
		}
	}
	r.JobsNeverStarted = &never
}

// Deviation is how far teams' cards were from their fair shares: Mean is
// the largest, over teams, of the time-weighted mean of |held - fair
// share|; Max the largest of |held - fair share| over teams and states
// that lasted.
type Deviation struct {
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

// Tail summarises a distribution by its median and its 99th percentile
// (nearest rank).
type Tail struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Later returns the later of two times.
func Later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Earlier returns the earlier of two times.
func Earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
