package gpuclaims

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpuledger/dra"
)

// Skipping the nodes without room. Upstream's allocator runs in Filter on
// every node the scheduler tries, until the scheduler has its share of
// feasible nodes, and on a node whose GPUs are all held it fails only
// after reading them: about 25 us a node (the 500-node DRA benchmark row's
// profile: 11.9 s of Filter for 2,000 pods, some 230 to 300 nodes tried
// each), against well under 1 us for listing a node. A packing
// profile fills nodes on purpose, so on a busy DRA cluster most of those
// attempts fail. GPUClaims' PreFilter lists the nodes that may have room
// instead (a PreFilterResult), when at least 1/skipShare of the nodes
// have none, and rejects the pod at once when no node has.
//
// A node is left out only when both accounts agree it is short: the GPU
// ledger's (dra.Ledger.Short, kept per need and read again only
// for the nodes whose view changed), and the same count against the
// allocations of the scheduler's own DRA manager, which upstream's
// allocator reads. The ledger's informer handlers may lag the
// scheduler's: a claim deallocated that requeued the pod, or a slice
// updated, must not leave a node out that upstream would try. A node whose
// slices the ledger has not yet read as the scheduler lists them stays in,
// and when the GPU driver publishes a slice not local to one node nothing
// is left out.
//
// The scheduler treats the nodes a PreFilterResult leaves out as
// UnschedulableAndUnresolvable, and preemption never tries them. That
// changes nothing for DRA devices in Kubernetes 1.37: DynamicResources has
// no PreFilterExtensions, so preemption's dry run never frees a device
// (TestUpstreamDoesNotPreemptDevices pins it).

// skipShare: the list is made when at least 1/skipShare of the nodes are
// short. Listing a node costs three map operations; leaving one out saves
// an allocator run on each node the scheduler would have tried.
const skipShare = 16

// maxNeeds bounds the needs whose short nodes are kept.
const maxNeeds = 16

// roomScan keeps, for each need, which nodes the ledger counts short and
// which in use with room, as of the ledger's DRA generation.
type roomScan struct {
	mu     sync.Mutex
	byNeed map[string]*needScan
}

// needScan is what the ledger counts of each node for one need: short
// (no room), or open (room, and in use for GPU work: dra.Ledger.InUse).
type needScan struct {
	gen         uint64
	short, open map[string]bool
}

// read records what the ledger counts of node.
func (ns *needScan) read(devices *dra.Ledger, need dra.Need, node string) {
	delete(ns.short, node)
	delete(ns.open, node)
	switch {
	case devices.Short(need, node, nil):
		ns.short[node] = true
	case devices.InUse(node):
		ns.open[node] = true
	}
}

// candidates returns the nodes the pod is tried on (of nodes, the
// snapshot's): a narrowed list (narrow.go, when narrow allows it),
// recorded in cs, or the nodes on which the pod's claims may be allocated,
// or nil for every node; when no node can hold them, the status that
// rejects the pod. unsure are the nodes whose slices the ledger has not
// read as the scheduler listed them.
func (pl *GPUClaims) candidates(cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo, unsure sets.Set[string], narrow bool) (*fwk.PreFilterResult, *fwk.Status) {
	need := pl.devices.NeedOf(pod)
	if need.IsZero() {
		return nil, nil
	}
	pl.scan.mu.Lock()
	defer pl.scan.mu.Unlock()
	ns := pl.scan.of(pl.devices, need, nodes)
	if narrow {
		if listed := pl.narrowed(pod, ns, nodes, unsure); listed != nil {
			cs.Write(narrowKey, &narrowState{listed: listed.Len()})
			return &fwk.PreFilterResult{NodeNames: listed}, nil
		}
	}
	short := ns.short
	if len(short) == 0 || len(short)*skipShare < len(nodes) {
		return nil, nil
	}
	allocated, err := pl.dra.ResourceClaims().ListAllAllocatedDevices()
	if err != nil {
		return nil, nil
	}
	driver := pl.devices.Driver()
	held := func(ref dra.DeviceRef) bool {
		return allocated.Has(structured.MakeDeviceID(driver, ref.Pool, ref.Device))
	}
	names := make(sets.Set[string], len(nodes)-len(short))
	out := 0
	for _, ni := range nodes {
		name := ni.Node().Name
		if short[name] && !unsure.Has(name) && pl.devices.Short(need, name, held) {
			out++
			continue
		}
		names.Insert(name)
	}
	switch {
	case len(names) == 0:
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("no node has the free %s devices the pod's claims ask for", driver))
	case out*skipShare < len(nodes):
		return nil, nil
	}
	return &fwk.PreFilterResult{NodeNames: names}, nil
}

// of returns the need's scan, reading again only the nodes whose view
// changed since the need was last read. s.mu is held: the scheduler runs
// one PreFilter at a time; the lock only makes that safe to rely on.
func (s *roomScan) of(devices *dra.Ledger, need dra.Need, nodes []fwk.NodeInfo) *needScan {
	ns := s.byNeed[need.Key()]
	var since uint64
	if ns != nil {
		since = ns.gen
	}
	changed, now, ok := devices.ChangedSince(since)
	if ns == nil || !ok || len(ns.short)+len(ns.open) > len(nodes) {
		if s.byNeed == nil || len(s.byNeed) >= maxNeeds {
			s.byNeed = map[string]*needScan{}
		}
		ns = &needScan{short: map[string]bool{}, open: map[string]bool{}}
		s.byNeed[need.Key()] = ns
		for _, ni := range nodes {
			ns.read(devices, need, ni.Node().Name)
		}
		ns.gen = now
		return ns
	}
	for _, node := range changed {
		ns.read(devices, need, node)
	}
	ns.gen = now
	return ns
}
