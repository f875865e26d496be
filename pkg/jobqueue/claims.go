package jobqueue

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpuledger/dra"
)

// Claims: a group's DRA claims solved whole. Upstream's scheduler
// allocates a gang's claims pod by pod, each taking the first devices that
// fit, and never revisits an earlier member's choice (kubernetes#138765):
// a gang that fits when its members' devices are chosen together may not
// fit pod by pod. The queue places the claims of a group's members on
// paper together, with upstream's allocator (so that every placement is
// one upstream accepts): members in turn, each on the nodes where it
// fits, the devices earlier members took counted as allocated; when a
// member fits nowhere, the previous member is tried again with the devices
// it got left out, so that a different choice for it is found. The
// solution, member by member, is the plan's Claims; GPUClaims holds each
// member to it (docs/dra.md).

// Bounds of the search: allocator calls for one group, alternatives of one
// member on one node, and nodes tried for one member.
const (
	maxSolveCalls    = 512
	maxAlternatives  = 8
	maxCandidateRoom = 16
)

// ClaimSolver places the claims of groups' members on paper for one pass,
// with upstream's allocator, over the DRA manager's slices, classes and
// allocated devices (in-flight ones included), and the devices the pass
// has placed already.
type ClaimSolver struct {
	ctx      context.Context
	gpus     *dra.Ledger
	dra      fwk.SharedDRAManager
	features structured.Features
	cel      *cel.Cache
	// byNode are the slices local to each node, shared those that are not.
	byNode map[string][]*resourceapi.ResourceSlice
	shared []*resourceapi.ResourceSlice
	// state is what is allocated: the cluster's, and the pass's paper.
	state structured.AllocatedState
	calls int
}

// NewClaimSolver reads the DRA manager's slices and allocated devices for
// one pass; features are the allocator's (the scheduler's feature gates).
func NewClaimSolver(ctx context.Context, manager fwk.SharedDRAManager, gpus *dra.Ledger, features structured.Features) (*ClaimSolver, error) {
	list, err := manager.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, err
	}
	state, err := manager.ResourceClaims().GatherAllocatedState()
	if err != nil {
		return nil, err
	}
	s := &ClaimSolver{ctx: ctx, gpus: gpus, dra: manager, features: features, byNode: map[string][]*resourceapi.ResourceSlice{},
		cel:   cel.NewCache(64, cel.Features{EnableConsumableCapacity: features.ConsumableCapacity, EnableListTypeAttributes: features.ListTypeAttributes}),
		state: cloneState(*state)}
	for _, sl := range list {
		if node := ptr.Deref(sl.Spec.NodeName, ""); node != "" {
			s.byNode[node] = append(s.byNode[node], sl)
		} else {
			s.shared = append(s.shared, sl)
		}
	}
	return s, nil
}

func cloneState(s structured.AllocatedState) structured.AllocatedState {
	return structured.AllocatedState{AllocatedDevices: s.AllocatedDevices.Clone(), AllocatedSharedDeviceIDs: s.AllocatedSharedDeviceIDs.Clone(),
		AggregatedCapacity: s.AggregatedCapacity.Clone()}
}

// claimSolver returns the pass's ClaimSolver when a pending member of a
// group has resource claims and the scheduler has DRA; nil otherwise.
func (q *Queue) claimSolver(groups map[string]*Group) *ClaimSolver {
	if q.dra == nil {
		return nil
	}
	for _, g := range groups {
		if slices.ContainsFunc(g.Pending, func(p *corev1.Pod) bool { return len(p.Spec.ResourceClaims) > 0 }) {
			s, err := NewClaimSolver(context.Background(), q.dra, dra.Of(q.gpus), q.draFeatures)
			if err != nil {
				return nil
			}
			return s
		}
	}
	return nil
}

// HeldClaim is a claim allocated to a pending member of a group.
type HeldClaim struct {
	Pod   *corev1.Pod
	Claim *resourceapi.ResourceClaim
}

// heldClaims returns the claims allocated to the pending pods that a
// release may deallocate, as upstream's PostFilter would for an
// unschedulable pod: reserved for no pod but the pod, and not being
// allocated by the scheduler now. nil without DRA.
func (q *Queue) heldClaims(pending []*corev1.Pod) []HeldClaim {
	if q.dra == nil {
		return nil
	}
	var out []HeldClaim
	for _, pod := range pending {
		for i := range pod.Spec.ResourceClaims {
			name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
			if err != nil || name == nil {
				continue
			}
			claim, err := q.dra.ResourceClaims().Get(pod.Namespace, *name)
			if err != nil || claim.Status.Allocation == nil || q.dra.ResourceClaims().GetPendingAllocation(claim.UID) != nil {
				continue
			}
			if slices.ContainsFunc(claim.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool { return r.UID != pod.UID }) {
				continue
			}
			out = append(out, HeldClaim{Pod: pod, Claim: claim})
		}
	}
	return out
}

// claimMember is a demand whose claims the solver places.
type claimMember struct {
	demand int
	claims []*resourceapi.ResourceClaim
	// node is the node a claim already allocated or pending holds the
	// member to ("" for none).
	node string
}

// members returns the members of the placed demands that have claims to
// place, or why the group cannot be solved yet (a claim not created).
func (s *ClaimSolver) members(demands []Demand, at placement) ([]claimMember, string) {
	var out []claimMember
	for i := range demands {
		if at.at[i] < 0 {
			continue
		}
		pod := demands[i].Pod
		m := claimMember{demand: i}
		for j := range pod.Spec.ResourceClaims {
			name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[j])
			if err != nil || name == nil {
				return nil, fmt.Sprintf("the claims of pod %s/%s are not created yet", pod.Namespace, pod.Name)
			}
			claim, err := s.dra.ResourceClaims().Get(pod.Namespace, *name)
			if err != nil {
				return nil, fmt.Sprintf("claim %s/%s of pod %s is not created yet", pod.Namespace, *name, pod.Name)
			}
			allocation := claim.Status.Allocation
			if allocation == nil {
				allocation = s.dra.ResourceClaims().GetPendingAllocation(claim.UID)
			}
			if allocation != nil {
				m.node = allocatedNode(allocation)
				continue
			}
			m.claims = append(m.claims, claim)
		}
		// A claim for all devices of a kind is upstream's alone: hiding
		// devices from it would change what "all" gives.
		if len(m.claims) > 0 && !slices.ContainsFunc(m.claims, asksForAll) {
			out = append(out, m)
		}
	}
	return out, ""
}

// asksForAll reports whether a request of the claim has allocation mode
// All.
func asksForAll(c *resourceapi.ResourceClaim) bool {
	for _, r := range c.Spec.Devices.Requests {
		if r.Exactly != nil && r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeAll {
			return true
		}
		for _, sub := range r.FirstAvailable {
			if sub.AllocationMode == resourceapi.DeviceAllocationModeAll {
				return true
			}
		}
	}
	return false
}

// allocatedNode is the node an allocation holds its pod to, "" for any.
func allocatedNode(a *resourceapi.AllocationResult) string {
	if a.NodeSelector == nil {
		return ""
	}
	for _, t := range a.NodeSelector.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// Solve places the claims of the members placed on paper (at) together:
// each member of demands whose claims are not yet allocated gets a node
// and devices, its paper placement moved there when it differs; plans
// receives them by pod UID. ok is false, with why in words, when they do
// not fit together within the search's bounds; nothing changes then.
func (s *ClaimSolver) Solve(demands []Demand, rooms []Room, at placement, plans map[types.UID]dra.ClaimPlan) (ok bool, why string) {
	members, why := s.members(demands, at)
	if why != "" {
		return false, why
	}
	if len(members) == 0 {
		return true, ""
	}
	s.calls = 0
	got := map[types.UID]dra.ClaimPlan{}
	if !s.solve(members, 0, demands, rooms, at, got) {
		return false, fmt.Sprintf("the DRA claims of its %d members with claims cannot be allocated together on the free devices", len(members))
	}
	for uid, p := range got {
		plans[uid] = p
	}
	return true, ""
}

// solve places members[i:]; on false it has undone what it did.
func (s *ClaimSolver) solve(members []claimMember, i int, demands []Demand, rooms []Room, at placement, plans map[types.UID]dra.ClaimPlan) bool {
	if i == len(members) {
		return true
	}
	m := members[i]
	d := &demands[m.demand]
	for _, r := range s.candidates(m, d, rooms, at) {
		from := at.at[m.demand]
		if r != from {
			rooms[from].Free = rooms[from].Free.Add(d.Request)
			rooms[r].Free = rooms[r].Free.Sub(d.Request)
			at.at[m.demand] = r
		}
		hidden := map[string]bool{}
		for range maxAlternatives {
			if s.calls >= maxSolveCalls {
				break
			}
			results, ok := s.allocate(rooms[r].Node, m.claims, hidden)
			if !ok {
				break
			}
			s.take(results)
			plan := dra.ClaimPlan{Node: rooms[r].Node.Name}
			for _, a := range results {
				for _, res := range a.Devices.Results {
					plan.Devices = append(plan.Devices, dra.DeviceRef{Pool: res.Pool, Device: res.Device})
					hidden[res.Pool+"/"+res.Device] = true
				}
			}
			plans[d.Pod.UID] = plan
			if s.solve(members, i+1, demands, rooms, at, plans) {
				return true
			}
			delete(plans, d.Pod.UID)
			s.give(results)
		}
		if r != from {
			rooms[r].Free = rooms[r].Free.Add(d.Request)
			rooms[from].Free = rooms[from].Free.Sub(d.Request)
			at.at[m.demand] = from
		}
	}
	return false
}

// candidates are the rooms to try a member on: the node its allocated
// claims hold it to; else its paper placement's first, then the rooms it
// fits with the least GPU free (best fit), at most maxCandidateRoom.
func (s *ClaimSolver) candidates(m claimMember, d *Demand, rooms []Room, at placement) []int {
	from := at.at[m.demand]
	if m.node != "" {
		for r := range rooms {
			if rooms[r].Node.Name == m.node && (r == from || rooms[r].Free.Covers(d.Request)) {
				return []int{r}
			}
		}
		return nil
	}
	out := []int{from}
	var others []int
	for r := range rooms {
		if r != from && len(s.byNode[rooms[r].Node.Name]) > 0 && rooms[r].Free.Covers(d.Request) && d.Allows(rooms[r].Node) {
			others = append(others, r)
		}
	}
	slices.SortStableFunc(others, func(a, b int) int {
		if tighter(&rooms[a], &rooms[b]) {
			return -1
		}
		if tighter(&rooms[b], &rooms[a]) {
			return 1
		}
		return 0
	})
	return append(out, others[:min(len(others), maxCandidateRoom-1)]...)
}

// allocate runs upstream's allocator for the claims on node, over its
// slices with the GPU driver's devices in the ledger's order and the
// hidden devices left out; ok is false when they do not fit there.
func (s *ClaimSolver) allocate(node *corev1.Node, claims []*resourceapi.ResourceClaim, hidden map[string]bool) ([]resourceapi.AllocationResult, bool) {
	s.calls++
	view, isDRA := s.gpus.View(node.Name)
	allocated := dra.AllocatedDevices(&s.state)
	var list []*resourceapi.ResourceSlice
	for _, sl := range s.byNode[node.Name] {
		if isDRA && sl.Spec.Driver == s.gpus.Driver() {
			sl = view.Ordered(sl)
		}
		if len(hidden) > 0 {
			sl = dra.KeepDevices(sl, func(name string) bool {
				return !hidden[sl.Spec.Pool.Name+"/"+name] || allocated.Has(structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, name))
			})
		}
		list = append(list, sl)
	}
	list = append(list, s.shared...)
	alloc, err := structured.NewAllocator(s.ctx, s.features, s.state, s.dra.DeviceClasses(), list, s.cel)
	if err != nil {
		return nil, false
	}
	results, err := alloc.Allocate(s.ctx, node, claims)
	if err != nil || len(results) != len(claims) {
		return nil, false
	}
	return results, true
}

// take counts the devices of the results as allocated for the rest of the
// pass; give undoes it.
func (s *ClaimSolver) take(results []resourceapi.AllocationResult) { s.count(results, true) }

func (s *ClaimSolver) give(results []resourceapi.AllocationResult) { s.count(results, false) }

// count adds the devices of the results to the pass's allocated state, or
// removes them.
func (s *ClaimSolver) count(results []resourceapi.AllocationResult, add bool) {
	for _, a := range results {
		for _, r := range a.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			switch {
			case r.ShareID == nil && add:
				s.state.AllocatedDevices.Insert(id)
			case r.ShareID == nil:
				s.state.AllocatedDevices.Delete(id)
			case add:
				s.state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					s.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
			default:
				s.state.AllocatedSharedDeviceIDs.Delete(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					s.state.AggregatedCapacity.Remove(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
			}
		}
	}
}
