package jobqueue

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/aisched/aisched/pkg/topology"
)

// Placed is where a plan placed a group that asks for a topology domain
// (topology.Constraint): Coscheduling's Filter keeps its members inside.
type Placed struct {
	// Topology is the topology's name and Level the index of the domain's
	// level in it: -1 for the whole cluster (a group with slices whose
	// preferred level has no domain that holds it and that requires none).
	Topology string
	Level    int
	Domain   string
	// Words name the domain in messages ("rack r3"), Selector in the
	// PodGroup's status ("example.com/rack=r3").
	Words, Selector string
	// Preferred is true when the domain is of the level the group prefers
	// (or requires, without a preference).
	Preferred bool
	// Nodes are the nodes the members may use, each with the index of its
	// slice's domain in Slices (0 without slices).
	Nodes map[string]int
	// Slices are, for a group in slices, the domains of the slice level
	// the plan gave members to, and how many each takes in all (members
	// already bound included).
	Slices []SliceQuota
	// Why says, for the Admitted message, where the group is and why
	// there (the preferred level's best try when it fell back).
	Why string
	// names are the Nodes' names, for the scheduler's PreFilterResult.
	names sets.Set[string]
}

// NodeNames returns the names of the nodes the members may use; the set
// must not be changed.
func (p *Placed) NodeNames() sets.Set[string] {
	return p.names
}

// withNames completes p with the set of its nodes' names.
func (p *Placed) withNames() *Placed {
	p.names = sets.KeySet(p.Nodes)
	return p
}

// SliceQuota is a domain of a group's slice level and how many of its
// members it takes.
type SliceQuota struct {
	Domain, Words string
	Members       int
}

// topologies is the topology side of one Compute: the pass's topologies,
// the groups' resolved constraints, and the domains of each level, built
// when first asked.
type topologies struct {
	list     []*topology.Topology
	resolved map[*Group]resolution
	levels   map[levelKey]*levelDomains
	// roomOf is each node's room, built when first asked.
	roomOf map[string]int
	// never remembers, for groups alike with the same constraint, the most
	// of them the empty domains hold, once a try found fewer than wanted.
	never map[string]int
}

type resolution struct {
	r       *topology.Resolved
	problem string
}

type levelKey struct {
	topology string
	level    int
}

// levelDomains are the domains of one level.
type levelDomains struct {
	list []*domain
	// of is each room's domain, an index into list; -1 outside the level.
	of []int
}

// domain is one domain of a level: its rooms, and what they have free
// (thousandths of cards, millicores), kept up to date through touch.
type domain struct {
	name             string
	rooms            []int
	freeGPU, freeCPU int64
	dirty            bool
}

func newTopologies(list []*topology.Topology) *topologies {
	return &topologies{list: list, resolved: map[*Group]resolution{}, levels: map[levelKey]*levelDomains{}, never: map[string]int{}}
}

// constraint returns g's resolved constraint; nil with no problem when g
// asks for no domain. A problem names the key whose value cannot be
// honoured.
func (c *computation) constraint(g *Group) (*topology.Resolved, string) {
	if g.Constraint.Empty() && g.ConstraintProblem == "" {
		return nil, ""
	}
	if res, ok := c.topo.resolved[g]; ok {
		return res.r, res.problem
	}
	res := resolution{problem: g.ConstraintProblem}
	if res.problem == "" {
		r, err := topology.Resolve(g.Constraint, c.topo.list)
		switch {
		case err != nil:
			res.problem = err.Error()
		case r.Slice >= 0 && g.MinAvailable%r.SliceSize != 0:
			res.problem = fmt.Sprintf("%s: slices of %d do not divide the group's %d members (min-available)", g.Constraint.SliceKey, r.SliceSize, g.MinAvailable)
		default:
			res.r = r
		}
	}
	c.topo.resolved[g] = res
	return res.r, res.problem
}

// levelDomains returns the domains of level i of t.
func (c *computation) levelDomains(t *topology.Topology, i int) *levelDomains {
	key := levelKey{t.Name, i}
	if ld, ok := c.topo.levels[key]; ok {
		return ld
	}
	ld := &levelDomains{of: make([]int, len(c.rooms))}
	byName := map[string]int{}
	for r := range c.rooms {
		name, ok := t.Domain(c.rooms[r].Node, i)
		if !ok {
			ld.of[r] = -1
			continue
		}
		d, ok := byName[name]
		if !ok {
			d = len(ld.list)
			byName[name] = d
			ld.list = append(ld.list, &domain{name: name, dirty: true})
		}
		ld.list[d].rooms = append(ld.list[d].rooms, r)
		ld.of[r] = d
	}
	// Domains in name order, so that ties fall the same way every pass.
	order := slices.Clone(ld.list)
	slices.SortFunc(order, func(a, b *domain) int { return strings.Compare(a.name, b.name) })
	index := make(map[*domain]int, len(order))
	for i, d := range order {
		index[d] = i
	}
	for r, d := range ld.of {
		if d >= 0 {
			ld.of[r] = index[ld.list[d]]
		}
	}
	ld.list = order
	c.topo.levels[key] = ld
	return ld
}

// touch marks the domains of rooms as changed: their free capacity is
// counted again when next asked.
func (c *computation) touch(at placement) {
	if len(c.topo.levels) == 0 {
		return
	}
	for _, r := range at.at {
		if r >= 0 {
			c.touchRoom(r)
		}
	}
}

func (c *computation) touchRoom(r int) {
	for _, ld := range c.topo.levels {
		if d := ld.of[r]; d >= 0 {
			ld.list[d].dirty = true
		}
	}
}

// free returns what d has free, counted again if it changed.
func (c *computation) free(d *domain) (gpuMilli, milliCPU int64) {
	if d.dirty {
		d.freeGPU, d.freeCPU = 0, 0
		for _, r := range d.rooms {
			d.freeGPU += c.rooms[r].GPUs.FreeMilli()
			d.freeCPU += max(c.rooms[r].Free.MilliCPU, 0)
		}
		d.dirty = false
	}
	return d.freeGPU, d.freeCPU
}

// ask is what the need largest of a group's demands take together, for
// a quick look at a domain's free capacity, and which resource orders the
// domains (cards when the group asks for any).
type ask struct {
	gpuMilli, milliCPU int64
}

func askOf(demands []Demand, need int) ask {
	order := slices.Clone(demands)
	slices.SortStableFunc(order, largestFirst)
	var a ask
	for _, d := range order[:min(need, len(order))] {
		a.gpuMilli += d.GPU.TotalMilli()
		a.milliCPU += d.Request.MilliCPU
	}
	return a
}

// fuller orders domains fullest first: by free cards for a group that asks
// for cards, else by free CPU (best fit over domains: whole domains stay
// free for the groups that need them).
func (c *computation) fuller(a ask) func(x, y *domain) int {
	return func(x, y *domain) int {
		xg, xc := c.free(x)
		yg, yc := c.free(y)
		if a.gpuMilli > 0 {
			return cmp.Or(cmp.Compare(xg, yg), cmp.Compare(xc, yc))
		}
		return cmp.Or(cmp.Compare(xc, yc), cmp.Compare(xg, yg))
	}
}

// holds reports whether d has free at least what a asks, in total.
func (c *computation) holds(d *domain, a ask) bool {
	g, cpu := c.free(d)
	return g >= a.gpuMilli && cpu >= a.milliCPU
}

// inside reports whether every room of rooms is in d (the bound members
// of a group must be inside the domain it is placed in).
func inside(ld *levelDomains, d int, rooms []int) bool {
	for _, r := range rooms {
		if ld.of[r] != d {
			return false
		}
	}
	return true
}

// boundRooms returns the rooms of g's bound members.
func (c *computation) boundRooms(g *Group) []int {
	if len(g.Bound) == 0 {
		return nil
	}
	out := make([]int, 0, len(g.Bound))
	for _, p := range g.Bound {
		if r, ok := c.roomIndex(p.Spec.NodeName); ok {
			out = append(out, r)
		}
	}
	return out
}

// roomIndex returns the room of a node.
func (c *computation) roomIndex(node string) (int, bool) {
	if c.topo.roomOf == nil {
		c.topo.roomOf = make(map[string]int, len(c.rooms))
		for r := range c.rooms {
			c.topo.roomOf[c.rooms[r].Node.Name] = r
		}
	}
	r, ok := c.topo.roomOf[node]
	return r, ok
}

// shortfall is the best try that did not place a group, for its message.
type shortfall struct {
	level int
	words string
	fit   int
}

// fitTopology places need of the demands inside one domain: of the
// preferred level first, then of each coarser level up to the required
// one, in the fullest domain that holds them; without a required level,
// anywhere at last. It returns how many it placed (need, or 0 with
// nothing taken), where, and the domain (nil for a group placed anywhere
// without slices); when it places none, the best try at each level.
func (c *computation) fitTopology(g *Group, r *topology.Resolved, demands []Demand, need int) (int, placement, *Placed, []shortfall) {
	bound := c.boundRooms(g)
	levels := r.Levels()
	if need <= 0 {
		// Placed already: where it was, or the domain its members share.
		if g.Placed != nil {
			return 0, newPlacement(len(demands)), g.Placed, nil
		}
		for _, level := range levels {
			ld := c.levelDomains(r.Topology, level)
			if len(bound) > 0 && ld.of[bound[0]] >= 0 && inside(ld, ld.of[bound[0]], bound) {
				d := ld.list[ld.of[bound[0]]]
				p := c.placedIn(r, level, d.name, level == levels[0], d.rooms, nil)
				p.Why = "inside " + p.Words
				return 0, newPlacement(len(demands)), p, nil
			}
		}
		return 0, newPlacement(len(demands)), nil, nil
	}
	a := askOf(demands, need)
	var short []shortfall
	for _, level := range levels {
		ld := c.levelDomains(r.Topology, level)
		var cands []*domain
		for i, d := range ld.list {
			if c.holds(d, a) && inside(ld, i, bound) {
				cands = append(cands, d)
			}
		}
		slices.SortStableFunc(cands, c.fuller(a))
		best := shortfall{level: level, fit: -1}
		for _, d := range cands {
			fit, at, quotas := c.fitSliced(r, demands, need, d.rooms)
			if fit >= need {
				c.touch(at)
				return fit, at, c.placedIn(r, level, d.name, level == levels[0], d.rooms, quotas), short
			}
			unfit(demands, c.rooms, at)
			if fit > best.fit {
				best.fit, best.words = fit, r.Topology.Words(level, d.name)
			}
		}
		if best.fit < 0 && len(ld.list) > 0 {
			// No domain has enough free in total: the best is the freest,
			// and how many it holds is tried.
			freest := slices.MaxFunc(ld.list, c.fuller(a))
			fit, at, _ := c.fitSliced(r, demands, need, freest.rooms)
			unfit(demands, c.rooms, at)
			best.fit, best.words = fit, r.Topology.Words(level, freest.name)
		}
		short = append(short, best)
	}
	if r.Required >= 0 {
		return 0, newPlacement(len(demands)), nil, short
	}
	fit, at, quotas := c.fitSliced(r, demands, need, nil)
	if fit < need {
		unfit(demands, c.rooms, at)
		return 0, newPlacement(len(demands)), nil, short
	}
	c.touch(at)
	if r.Slice < 0 {
		return fit, at, nil, short
	}
	return fit, at, c.placedIn(r, -1, "", len(levels) == 0, nil, quotas), short
}

// sliceUse is a slice's domain and its rooms, for a Placed.
type sliceUse struct {
	domain string
	rooms  []int
}

// fitSliced places need of the demands on the rooms of scope (nil: all):
// best fit, and with slices, each slice of r.SliceSize members (largest
// first) inside one domain of the slice level, the fullest that holds it.
// It returns how many it placed and the domains the slices took.
func (c *computation) fitSliced(r *topology.Resolved, demands []Demand, need int, scope []int) (int, placement, []sliceUse) {
	if r.Slice < 0 {
		fit, at := fitIn(demands, c.rooms, scope, need)
		return fit, at, nil
	}
	subs := c.subdomains(r, scope)
	order := make([]int, len(demands))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return largestFirst(demands[i], demands[j]) })
	k := r.SliceSize
	p := newPlacement(len(demands))
	var used []sliceUse
	placed := 0
	for s := 0; (s+1)*k <= min(need, len(demands)); s++ {
		members := order[s*k : (s+1)*k]
		sub := make([]Demand, k)
		for i, m := range members {
			sub[i] = demands[m]
		}
		a := askOf(sub, k)
		slices.SortStableFunc(subs, c.fuller(a))
		ok := false
		for _, d := range subs {
			if !c.holds(d, a) {
				continue
			}
			fit, at := fitIn(sub, c.rooms, d.rooms, k)
			if fit < k {
				unfit(sub, c.rooms, at)
				continue
			}
			for i, m := range members {
				p.at[m], p.cards[m] = at.at[i], at.cards[i]
			}
			c.touch(at)
			used = append(used, sliceUse{domain: d.name, rooms: d.rooms})
			ok = true
			break
		}
		if !ok {
			break
		}
		placed += k
	}
	return placed, p, used
}

// subdomains returns the domains of r's slice level inside scope (nil:
// every one), each with its rooms inside scope.
func (c *computation) subdomains(r *topology.Resolved, scope []int) []*domain {
	ld := c.levelDomains(r.Topology, r.Slice)
	if scope == nil {
		return slices.Clone(ld.list)
	}
	var out []*domain
	seen := map[int]bool{}
	for _, room := range scope {
		if d := ld.of[room]; d >= 0 && !seen[d] {
			seen[d] = true
			out = append(out, ld.list[d])
		}
	}
	return out
}

// placedIn is the Placed of a group in domain name of level (-1: the
// whole cluster) with the rooms, or with the slices' domains used.
func (c *computation) placedIn(r *topology.Resolved, level int, name string, preferred bool, rooms []int, used []sliceUse) *Placed {
	t := r.Topology
	p := &Placed{Topology: t.Name, Level: level, Domain: name, Preferred: preferred, Nodes: map[string]int{}}
	if level >= 0 {
		p.Words, p.Selector = t.Words(level, name), t.Selector(level, name)
	} else {
		p.Words = "the cluster"
	}
	if len(used) == 0 {
		for _, room := range rooms {
			p.Nodes[c.rooms[room].Node.Name] = 0
		}
		return p.withNames()
	}
	index := map[string]int{}
	for _, u := range used {
		i, ok := index[u.domain]
		if !ok {
			i = len(p.Slices)
			index[u.domain] = i
			p.Slices = append(p.Slices, SliceQuota{Domain: u.domain, Words: t.Words(r.Slice, u.domain)})
			for _, room := range u.rooms {
				p.Nodes[c.rooms[room].Node.Name] = i
			}
		}
		p.Slices[i].Members += r.SliceSize
	}
	return p.withNames()
}

// admittedIn places the pending members of a group admitted by an earlier
// pass inside the domain it was placed in (the last plan's Placed); a
// group whose Placed is unknown (a scheduler that started since) is placed
// anew, inside the domain of its bound members. It returns where, and
// the Placed that keeps its members there (nil for none).
func (c *computation) admittedIn(g *Group, r *topology.Resolved, demands []Demand) (placement, *Placed) {
	if last := g.Placed; last != nil {
		if len(last.Slices) == 0 {
			scope := c.scopeOf(last.Nodes, -1)
			_, at := fitIn(demands, c.rooms, scope, len(demands))
			c.touch(at)
			return at, last
		}
		// Each slice's domain takes what it still lacks.
		boundIn := make([]int, len(last.Slices))
		for _, p := range g.Bound {
			if i, ok := last.Nodes[p.Spec.NodeName]; ok {
				boundIn[i]++
			}
		}
		p := newPlacement(len(demands))
		rest := make([]int, len(demands))
		for i := range rest {
			rest[i] = i
		}
		for i, s := range last.Slices {
			want := min(s.Members-boundIn[i], len(rest))
			if want <= 0 {
				continue
			}
			sub := make([]Demand, len(rest))
			for j, m := range rest {
				sub[j] = demands[m]
			}
			_, at := fitIn(sub, c.rooms, c.scopeOf(last.Nodes, i), want)
			c.touch(at)
			var left []int
			for j, m := range rest {
				if at.at[j] >= 0 {
					p.at[m], p.cards[m] = at.at[j], at.cards[j]
				} else {
					left = append(left, m)
				}
			}
			rest = left
		}
		return p, last
	}
	need := len(g.Pending)
	if fit, at, placed, _ := c.fitTopology(g, r, demands, need); fit >= need {
		return at, placed
	}
	_, at := fitFirst(demands, c.rooms, need, &c.cursor)
	c.touch(at)
	return at, nil
}

// scopeOf returns the rooms of nodes (those of slice i, or every one for
// i -1).
func (c *computation) scopeOf(nodes map[string]int, i int) []int {
	out := make([]int, 0, len(nodes))
	for name, s := range nodes {
		if i >= 0 && s != i {
			continue
		}
		if r, ok := c.roomIndex(name); ok {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// reserveTopology reserves for need of the demands, on the nodes as if
// they were empty, inside one domain: of the preferred level first, then
// of each coarser level up to the required one (anywhere last, without a
// required level). Among the domains that hold the group it takes the
// one with the most free now (the shortest wait), and among those with as
// much free the one with the most of the nodes it held in the last pass
// (kept), so that the reservation does not move without a gain. ok is
// false when no domain holds it.
func (c *computation) reserveTopology(r *topology.Resolved, demands []Demand, need int, kept map[string]bool, avoid map[int]bool) (map[int]Held, *Placed, bool) {
	a := askOf(demands, need)
	levels := r.Levels()
	for _, level := range levels {
		ld := c.levelDomains(r.Topology, level)
		var best *reserver
		var bestDomain *domain
		bestKept := -1
		for _, d := range ld.list {
			rv := newReserver(c.rooms, kept, avoid)
			if c.reserveSliced(rv, r, demands, need, d.rooms) < need {
				continue
			}
			k := 0
			for room := range rv.taken {
				if kept[c.rooms[room].Node.Name] {
					k++
				}
			}
			if best == nil {
				best, bestDomain, bestKept = rv, d, k
				continue
			}
			if cmp := c.fuller(a)(d, bestDomain); cmp > 0 || cmp == 0 && k > bestKept {
				best, bestDomain, bestKept = rv, d, k
			}
		}
		if best != nil {
			return best.taken, c.placedIn(r, level, bestDomain.name, level == levels[0], bestDomain.rooms, nil), true
		}
	}
	if r.Required >= 0 {
		return nil, nil, false
	}
	rv := newReserver(c.rooms, kept, avoid)
	if c.reserveSliced(rv, r, demands, need, nil) < need {
		return nil, nil, false
	}
	return rv.taken, nil, true
}

// reserveSliced is reserver.place on scope, and with slices each slice
// inside one domain of the slice level (the one with the most free now
// that holds it).
func (c *computation) reserveSliced(rv *reserver, r *topology.Resolved, demands []Demand, need int, scope []int) int {
	if r.Slice < 0 {
		return rv.place(demands, need, scope)
	}
	order := slices.Clone(demands)
	slices.SortStableFunc(order, largestFirst)
	subs := c.subdomains(r, scope)
	k := r.SliceSize
	a := askOf(order[:min(k, len(order))], k)
	slices.SortStableFunc(subs, func(x, y *domain) int { return c.fuller(a)(y, x) })
	placed := 0
	for s := 0; (s+1)*k <= min(need, len(order)); s++ {
		sub := order[s*k : (s+1)*k]
		ok := false
		for _, d := range subs {
			before := rv.clone()
			if rv.place(sub, k, d.rooms) == k {
				ok = true
				break
			}
			*rv = *before
		}
		if !ok {
			break
		}
		placed += k
	}
	return placed
}

// everFitsTopology reports whether need of the demands fit one domain of
// the required level (the whole cluster without one) with every pod gone;
// placed is the most that fit one, words the domain. Groups alike with the
// same constraint are asked once per pass.
func (c *computation) everFitsTopology(r *topology.Resolved, demands []Demand, shape string, alike bool, need int) (placed int, words string, ok bool) {
	key := fmt.Sprintf("%s|%+v", shape, r.Constraint)
	if most, known := c.topo.never[key]; alike && known && need > most {
		return most, "", false
	}
	if r.Required < 0 {
		placed = c.reserveSliced(newReserver(c.in.Rooms, nil, nil), r, demands, need, nil)
		if placed < need && alike {
			c.topo.never[key] = placed
		}
		return placed, "", placed >= need
	}
	ld := c.levelDomains(r.Topology, r.Required)
	placed = -1
	for _, d := range ld.list {
		n := c.reserveSliced(newReserver(c.in.Rooms, nil, nil), r, demands, need, d.rooms)
		if n >= need {
			return n, r.Topology.Words(r.Required, d.name), true
		}
		if n > placed {
			placed, words = n, r.Topology.Words(r.Required, d.name)
		}
	}
	placed = max(placed, 0)
	if alike {
		c.topo.never[key] = placed
	}
	return placed, words, false
}

// preemptTopology finds, among the domains of the levels the group may
// use (preferred first), the one where preempting units lets need of the
// demands fit at the least cost (the lowest priority taken, then the
// fewest pods), so that preemption frees one domain rather than nodes
// scattered over the cluster. Slices are not taken into account: the
// victims free a domain; the group is then placed in slices there.
func (c *computation) preemptTopology(r *topology.Resolved, demands []Demand, need int, units []*unit, allow func([]*unit) bool) ([]*corev1.Pod, placement, *Placed, bool) {
	levels := r.Levels()
	for _, level := range levels {
		ld := c.levelDomains(r.Topology, level)
		var best []*corev1.Pod
		var bestAt placement
		var bestDomain *domain
		found := false
		for _, d := range ld.list {
			sub, subUnits := c.within(d.rooms, units)
			victims, at, ok := preemption(demands, need, sub, subUnits, allow)
			if !ok {
				continue
			}
			victims = wholeUnits(victims, units)
			if !found || cheaper(victims, best) {
				best, bestDomain, found = victims, d, true
				bestAt = newPlacement(len(demands))
				for i, room := range at.at {
					if room >= 0 {
						bestAt.at[i], bestAt.cards[i] = d.rooms[room], at.cards[i]
					}
				}
			}
		}
		if found {
			return best, bestAt, c.placedIn(r, level, bestDomain.name, level == levels[0], bestDomain.rooms, nil), true
		}
	}
	if r.Required >= 0 {
		return nil, placement{}, nil, false
	}
	victims, at, ok := preemption(demands, need, c.rooms, units, allow)
	return victims, at, nil, ok
}

// within returns copies of the rooms of a domain and the units with their
// pods there, renumbered to the copies.
func (c *computation) within(rooms []int, units []*unit) ([]Room, []*unit) {
	sub := make([]Room, len(rooms))
	local := make(map[int]int, len(rooms))
	for i, r := range rooms {
		sub[i] = c.rooms[r]
		local[r] = i
	}
	var out []*unit
	for _, u := range units {
		var pods []podAt
		for _, pa := range u.pods {
			if i, ok := local[pa.room]; ok {
				pods = append(pods, podAt{pod: pa.pod, room: i})
			}
		}
		if len(pods) > 0 {
			out = append(out, &unit{key: u.key, priority: u.priority, pods: pods, ending: u.ending})
		}
	}
	return sub, out
}

// wholeUnits returns every pod of the units that victims are of: a unit
// is preempted whole, its pods outside the domain too.
func wholeUnits(victims []*corev1.Pod, units []*unit) []*corev1.Pod {
	keys := map[string]bool{}
	for _, v := range victims {
		keys[unitKey(v)] = true
	}
	var out []*corev1.Pod
	for _, u := range units {
		if keys[u.key] {
			for _, pa := range u.pods {
				out = append(out, pa.pod)
			}
		}
	}
	return out
}

// cheaper reports whether victims a cost less than b: a lower highest
// priority taken, then fewer pods.
func cheaper(a, b []*corev1.Pod) bool {
	top := func(ps []*corev1.Pod) int32 {
		var p int32 = -1 << 31
		for _, v := range ps {
			if v.Spec.Priority != nil {
				p = max(p, *v.Spec.Priority)
			} else {
				p = max(p, 0)
			}
		}
		return p
	}
	return cmp.Or(cmp.Compare(top(a), top(b)), cmp.Compare(len(a), len(b))) < 0
}

// topologyWords says, for a message, what a group asks: "inside one rack
// (example.com/rack)", with the levels tried.
func topologyWords(r *topology.Resolved) string {
	t := r.Topology
	var parts []string
	levels := r.Levels()
	for i, level := range levels {
		w := "one " + t.LevelWords(level)
		switch {
		case len(levels) > 1 && i == 0:
			w += " (preferred)"
		case len(levels) > 1 && i == len(levels)-1 && r.Required >= 0:
			w += " (required)"
		}
		parts = append(parts, w)
	}
	if r.Required < 0 && len(parts) > 0 {
		parts = append(parts, "anywhere")
	}
	out := ""
	if len(parts) > 0 {
		out = "inside " + strings.Join(parts, ", else ")
	}
	if r.Slice >= 0 {
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("in slices of %d inside one %s each", r.SliceSize, t.LevelWords(r.Slice))
	}
	return out
}

// placedWords says where a group was placed, for its Admitted message.
func placedWords(p *Placed, r *topology.Resolved, short []shortfall, need int) string {
	msg := "inside " + p.Words
	if len(p.Slices) > 0 {
		words := make([]string, len(p.Slices))
		for i, s := range p.Slices {
			words[i] = fmt.Sprintf("%d in %s", s.Members, s.Words)
		}
		msg += " (slices of " + fmt.Sprint(r.SliceSize) + ": " + strings.Join(words, ", ") + ")"
	}
	if !p.Preferred && len(short) > 0 {
		s := short[0]
		msg += fmt.Sprintf("; no %s (preferred) holds it: the best, %s, holds %d of its %d members", r.Topology.LevelWords(s.level), s.words, s.fit, need)
	}
	return msg
}

// shortWords says why no domain holds a group now, for its message.
func shortWords(r *topology.Resolved, short []shortfall, need int) string {
	if len(short) == 0 {
		return "no slice level domain holds a slice"
	}
	s := short[len(short)-1]
	return fmt.Sprintf("no %s holds its %d members: the best, %s, has room for %d", r.Topology.LevelWords(s.level), need, s.words, s.fit)
}

// admittedDecision is the decision for a group admitted into a domain.
func admittedDecision(p *Placed) Decision {
	d := admitted
	d.Message += ", " + p.Why
	return d
}

// domainWords names the domain of a reservation in a message, after
// sep: " of rack r3".
func domainWords(res *Reservation, sep string) string {
	if res.Domain == "" {
		return ""
	}
	return sep + res.Domain
}

// explainTopology says in plain words why need demands do not fit a
// domain now.
func explainTopology(demands []Demand, r *topology.Resolved, short []shortfall, need int) string {
	largest := demands[0]
	for _, d := range demands {
		if largestFirst(d, largest) < 0 {
			largest = d
		}
	}
	return fmt.Sprintf("needs %d pods placed at once %s, the largest with %s; %s", need, topologyWords(r), largest, shortWords(r, short, need))
}

// explainNeverTopology says why need demands never fit one domain of the
// required level: the most any domain holds with every node empty, and
// what no node has when that is none.
func explainNeverTopology(demands []Demand, r *topology.Resolved, need, placed int, words string, rooms []Room) string {
	if r.Required < 0 || words == "" {
		return fmt.Sprintf("%s (%s)", explainNever(demands, need, placed, rooms), topologyWords(r))
	}
	msg := fmt.Sprintf("it never fits %s: with every node empty, no %s holds the %d members it needs at once; the best, %s, holds %d",
		topologyWords(r), r.Topology.Levels[r.Required].Name, need, words, placed)
	if placed == 0 {
		if _, why, ok := strings.Cut(explainNever(demands, need, 0, rooms), "; "); ok {
			msg += "; " + why
		}
	}
	return msg
}

// preemption is preemption for g: inside one domain for a group that asks
// for one (preemptTopology), else on every node.
func (c *computation) preemption(g *Group, demands []Demand, need int, units []*unit, allow func([]*unit) bool) ([]*corev1.Pod, placement, *Placed, bool) {
	if r, _ := c.constraint(g); r != nil {
		return c.preemptTopology(r, demands, need, units, allow)
	}
	victims, at, ok := preemption(demands, need, c.rooms, units, allow)
	return victims, at, nil, ok
}

// reservationAt is reservationAt on the computation's rooms, naming the
// domain (nil: none).
func (c *computation) reservationAt(g Group, demands []Demand, at placement, domain *Placed) *Reservation {
	res := reservationAt(g, demands, at, c.rooms)
	c.touch(at)
	if domain != nil {
		res.Domain = domain.Words
	}
	return res
}
