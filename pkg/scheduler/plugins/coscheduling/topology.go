package coscheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/topology"
)

// domainKey is the CycleState key of the nodes a member's topology domain
// leaves it, which Filter checks.
const domainKey fwk.StateKey = Name + "/domain"

// domainState is the nodes a member may use, and the domain's words.
type domainState struct {
	nodes      sets.Set[string]
	words, key string
}

// Clone implements fwk.StateData; the state is read-only.
func (s *domainState) Clone() fwk.StateData { return s }

// domainNodes returns the nodes a member of the group with key may use:
// those of the domain the job queue placed the group in
// (jobqueue.Placed) and, for a group in slices, those of the slices'
// domains that still lack members (members bound or assumed counted on
// the scheduler's snapshot). The set must not be changed. ok is false when
// every slice has its members.
func (pl *Coscheduling) domainNodes(key string, placed *jobqueue.Placed) (sets.Set[string], bool) {
	if len(placed.Slices) == 0 {
		return placed.NodeNames(), true
	}
	count := make([]int, len(placed.Slices))
	infos := pl.handle.SnapshotSharedLister().NodeInfos()
	for name, slice := range placed.Nodes {
		ni, err := infos.Get(name)
		if err != nil {
			continue
		}
		for _, p := range ni.GetPods() {
			if k, ok := podgroup.KeyOf(p.GetPod()); ok && k == key {
				count[slice]++
			}
		}
	}
	out := sets.New[string]()
	for name, slice := range placed.Nodes {
		if count[slice] < placed.Slices[slice].Members {
			out.Insert(name)
		}
	}
	return out, out.Len() > 0
}

// preFilterDomain keeps a member of a group the job queue placed in a
// topology domain inside it: the nodes it may use as the PreFilterResult,
// and noted for Filter (a nominated node is filtered without the result).
// A member of a group that asks for a domain the current plan has not
// placed (its admission was revoked after a failed attempt, and the next
// pass has not admitted it again) waits: placed anywhere, it would join
// the members placed in the next domain and split the group. The queue
// activates the pending members when it admits the group again.
func (pl *Coscheduling) preFilterDomain(state fwk.CycleState, pod *corev1.Pod, ref podgroup.Ref) (*fwk.PreFilterResult, *fwk.Status) {
	key := ref.Key()
	placed := pl.queue.Placed(key)
	if placed == nil {
		if asksDomain(pod, ref) {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("pod group %s asks for a topology domain, and the job queue has placed it in none yet", key))
		}
		return nil, nil
	}
	nodes, ok := pl.domainNodes(key, placed)
	if !ok {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("pod group %s: every slice of %s has its members", key, placed.Words))
	}
	state.Write(domainKey, &domainState{nodes: nodes, words: placed.Words, key: key})
	return &fwk.PreFilterResult{NodeNames: nodes}, nil
}

// withinDomain returns the nodes of nodes a group's members may use and
// their words for a message: those of the domain preFilterDomain noted in
// state, or all of them ("the nodes"). The group's members must fit
// there, not anywhere in the cluster; and checking a rack's nodes rather
// than every node keeps PreFilter's check cheap on large clusters.
func withinDomain(state fwk.CycleState, nodes []fwk.NodeInfo) ([]fwk.NodeInfo, string) {
	data, err := state.Read(domainKey)
	if err != nil {
		return nodes, "the nodes"
	}
	d := data.(*domainState)
	out := make([]fwk.NodeInfo, 0, d.nodes.Len())
	for _, ni := range nodes {
		if n := ni.Node(); n != nil && d.nodes.Has(n.Name) {
			out = append(out, ni)
		}
	}
	return out, d.words
}

// asksDomain reports whether the group of pod asks for a topology domain,
// on its PodGroup or on the pod (as the job queue reads it: constraintOf).
// A form the queue cannot read counts as asking: the queue refuses it.
func asksDomain(pod *corev1.Pod, ref podgroup.Ref) bool {
	if _, ok, err := topology.OfPodGroup(ref.Annotations, ref.Volcano); ok || err != nil {
		return true
	}
	_, ok, err := topology.OfPod(pod)
	return ok || err != nil
}

// filterDomain refuses a node outside the member's domain.
func filterDomain(state fwk.CycleState, node string) *fwk.Status {
	data, err := state.Read(domainKey)
	if err != nil {
		return nil
	}
	s := data.(*domainState)
	if !s.nodes.Has(node) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node is outside %s, where the job queue placed pod group %s", s.words, s.key))
	}
	return nil
}

// refuseLoneTopology refuses a pod in no pod group that asks for a
// topology domain (in aisched's form or a peer's): the domain holds a
// group's members together, and the pods of a Job, say, are not a group
// unless they say so. Pods of a native Workload group are upstream's to
// place (its PodGroup's schedulingConstraints), whatever they carry.
func refuseLoneTopology(pod *corev1.Pod) *fwk.Status {
	if podgroup.Native(pod) {
		return nil
	}
	c, asks, err := topology.OfPod(pod)
	switch {
	case err != nil:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	case asks:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
			"%s: a topology domain holds the members of a pod group together, and this pod is in none: put the pods in a group (labels %s and %s)",
			c.Source(), podgroup.NameLabel, podgroup.MinAvailableLabel))
	}
	return nil
}
