package nodesim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
)

// The simulated DRA driver of nodes whose pool sets gpus.dra: the
// ResourceSlices NVIDIA's kubelet plugin publishes (nvidiadra), its device
// classes, and the kubelet's side of a pod's claims: before the pod starts
// its claims must be allocated, reserved for it, and name devices of this
// node, and no device may be prepared for two claims unless it is shared
// and has the capacity, nor two partitions of a card beyond its counters.
// It is the kubelets' own record, kept apart from the scheduler's.

// publishSlices makes the driver's slices of the node those wanted: created
// (owned by the node, as the kubelet plugin's are), updated, and, for a
// node that existed before, those no longer wanted deleted.
func (s *Simulator) publishSlices(ctx context.Context, node *corev1.Node, want []*resourceapi.ResourceSlice, existed bool) error {
	api := s.client.ResourceV1().ResourceSlices()
	have := map[string]*resourceapi.ResourceSlice{}
	if existed {
		list, err := api.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node.Name).String()})
		if err != nil {
			return err
		}
		for i := range list.Items {
			if sl := &list.Items[i]; sl.Spec.Driver == nvidiadra.Driver && ptr.Deref(sl.Spec.NodeName, "") == node.Name {
				have[sl.Name] = sl
			}
		}
	}
	for _, w := range want {
		old := have[w.Name]
		delete(have, w.Name)
		switch {
		case old == nil:
			sl := w.DeepCopy()
			sl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
			if _, err := api.Create(ctx, sl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		case !equality.Semantic.DeepEqual(old.Spec, w.Spec):
			sl := old.DeepCopy()
			sl.Spec = w.Spec
			if _, err := api.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	for name := range have {
		if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// publishClasses creates the driver's device classes when a simulated node
// publishes slices, as the driver's Helm chart does.
func (s *Simulator) publishClasses(ctx context.Context) error {
	s.nodesMu.RLock()
	dra := slices.ContainsFunc(slices.Collect(maps.Values(s.nodes)), func(n Node) bool { return len(n.Slices) > 0 })
	s.nodesMu.RUnlock()
	if !dra {
		return nil
	}
	for _, c := range nvidiadra.DeviceClasses() {
		if _, err := s.client.ResourceV1().DeviceClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// claimsOf reads the pod's claims from the apiserver, as the kubelet does
// before it prepares them.
func (s *Simulator) claimsOf(ctx context.Context, pod *corev1.Pod) ([]*resourceapi.ResourceClaim, error) {
	var out []*resourceapi.ResourceClaim
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil {
			return nil, err
		}
		if name == nil {
			continue
		}
		c, err := s.client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, *name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("claim %s of the pod: %w", pc.Name, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// prepareClaims prepares the claims of a pod on a node whose DRA driver
// is simulated (force: a pod that ran before a restart).
func (s *Simulator) prepareClaims(ctx context.Context, key string, pod *corev1.Pod, force bool) error {
	n, ok := s.node(pod.Spec.NodeName)
	if !ok || len(n.Slices) == 0 || len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	claims, err := s.claimsOf(ctx, pod)
	if err != nil {
		return err
	}
	return s.prepared.prepare(n, key, pod, claims, force)
}

// DRAHolders is the simulated kubelets' record of which claims hold which
// DRA device ("node/device": claims, sorted).
func (s *Simulator) DRAHolders() map[string]string { return s.prepared.Holders() }

// prepared is the simulated kubelets' record of the claims they prepared.
type prepared struct {
	mu sync.Mutex
	// claims are the prepared claims by UID.
	claims map[types.UID]*preparedClaim
	// devices is who holds each device, by node and device name.
	devices map[string]map[string]*deviceHolders
}

type preparedClaim struct {
	uid     types.UID
	name    string
	node    string
	results []resourceapi.DeviceRequestAllocationResult
	pods    map[string]bool
}

// deviceHolders is who holds a device: one claim, or several that share
// it with what each consumes.
type deviceHolders struct {
	whole  types.UID
	shares map[types.UID]map[resourceapi.QualifiedName]int64
}

func newPrepared() *prepared {
	return &prepared{claims: map[types.UID]*preparedClaim{}, devices: map[string]map[string]*deviceHolders{}}
}

// prepare prepares the pod's claims on node n, or says why it cannot:
// a claim not allocated or not reserved for the pod, a device not of this
// node, or a device given twice. force skips the checks of what others
// hold (pods that ran before a restart). Nothing is recorded on an error.
func (p *prepared) prepare(n Node, podKey string, pod *corev1.Pod, claims []*resourceapi.ResourceClaim, force bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	devices := deviceIndex(n.Slices)
	held := p.devices[n.Object.Name]
	if held == nil {
		held = map[string]*deviceHolders{}
	}
	next := maps.Clone(held)
	var fresh []*preparedClaim
	for _, c := range claims {
		key := c.Namespace + "/" + c.Name
		switch {
		case c.Status.Allocation == nil:
			return fmt.Errorf("claim %s is not allocated", key)
		case !resourceclaim.IsReservedForPod(pod, c, false):
			return fmt.Errorf("claim %s is not reserved for the pod", key)
		}
		if pc := p.claims[c.UID]; pc != nil {
			if pc.node != n.Object.Name {
				return fmt.Errorf("claim %s is prepared on node %s", key, pc.node)
			}
			continue
		}
		pc := &preparedClaim{uid: c.UID, name: key, node: n.Object.Name, pods: map[string]bool{}}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != nvidiadra.Driver {
				continue
			}
			d := devices[r.Device]
			if r.Pool != n.Object.Name || d == nil {
				return fmt.Errorf("claim %s names device %s/%s, which node %s does not have", key, r.Pool, r.Device, n.Object.Name)
			}
			h := &deviceHolders{}
			if old := next[r.Device]; old != nil {
				h = &deviceHolders{whole: old.whole, shares: maps.Clone(old.shares)}
			}
			if err := h.take(c.UID, key, d, r, force); err != nil {
				return fmt.Errorf("device %s of node %s: %w", r.Device, n.Object.Name, err)
			}
			next[r.Device] = h
			pc.results = append(pc.results, r)
		}
		fresh = append(fresh, pc)
	}
	if err := checkCounters(n.Slices, next); err != nil && !force {
		return fmt.Errorf("node %s: %w", n.Object.Name, err)
	}
	p.devices[n.Object.Name] = next
	for _, pc := range fresh {
		p.claims[pc.uid] = pc
	}
	for _, c := range claims {
		p.claims[c.UID].pods[podKey] = true
	}
	return nil
}

// take records that claim uid holds the device d (a result r of it).
func (h *deviceHolders) take(uid types.UID, key string, d *resourceapi.Device, r resourceapi.DeviceRequestAllocationResult, force bool) error {
	if r.ShareID == nil {
		if (h.whole != "" && h.whole != uid || len(h.shares) > 0) && !force {
			return fmt.Errorf("given twice: already prepared for another claim, then for %s", key)
		}
		h.whole = uid
		return nil
	}
	if h.whole != "" && !force {
		return fmt.Errorf("given twice: held whole by another claim, shared with %s", key)
	}
	if !ptr.Deref(d.AllowMultipleAllocations, false) && !force {
		return fmt.Errorf("shared with %s, but the device does not allow multiple allocations", key)
	}
	consumed := map[resourceapi.QualifiedName]int64{}
	for name, q := range r.ConsumedCapacity {
		consumed[name] = q.Value()
	}
	if h.shares == nil {
		h.shares = map[types.UID]map[resourceapi.QualifiedName]int64{}
	}
	h.shares[uid] = consumed
	for name, c := range d.Capacity {
		var sum int64
		for _, s := range h.shares {
			sum += s[name]
		}
		if sum > c.Value.Value() && !force {
			return fmt.Errorf("given beyond its %s: the claims sharing it consume %d of %d", name, sum, c.Value.Value())
		}
	}
	return nil
}

// deviceIndex is the devices of a node's slices by name.
func deviceIndex(list []*resourceapi.ResourceSlice) map[string]*resourceapi.Device {
	out := map[string]*resourceapi.Device{}
	for _, sl := range list {
		for i := range sl.Spec.Devices {
			out[sl.Spec.Devices[i].Name] = &sl.Spec.Devices[i]
		}
	}
	return out
}

// checkCounters checks that the devices held consume no counter set of
// the node beyond what it has (MIG partitions of one card).
func checkCounters(list []*resourceapi.ResourceSlice, held map[string]*deviceHolders) error {
	have := map[string]map[string]int64{}
	for _, sl := range list {
		for _, cs := range sl.Spec.SharedCounters {
			have[cs.Name] = map[string]int64{}
			for name, c := range cs.Counters {
				have[cs.Name][name] = c.Value.Value()
			}
		}
	}
	used := map[string]map[string]int64{}
	devices := deviceIndex(list)
	for _, name := range slices.Sorted(maps.Keys(held)) {
		if h := held[name]; h.whole == "" && len(h.shares) == 0 {
			continue
		}
		for _, cc := range devices[name].ConsumesCounters {
			if used[cc.CounterSet] == nil {
				used[cc.CounterSet] = map[string]int64{}
			}
			for counter, c := range cc.Counters {
				used[cc.CounterSet][counter] += c.Value.Value()
				if used[cc.CounterSet][counter] > have[cc.CounterSet][counter] {
					return fmt.Errorf("the devices prepared consume %d of counter %s of %s, which has %d (device %s given twice)",
						used[cc.CounterSet][counter], counter, cc.CounterSet, have[cc.CounterSet][counter], name)
				}
			}
		}
	}
	return nil
}

// unprepare releases the claims of the pod whose last pod it was.
func (p *prepared) unprepare(podKey string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid, pc := range p.claims {
		if !pc.pods[podKey] {
			continue
		}
		delete(pc.pods, podKey)
		if len(pc.pods) > 0 {
			continue
		}
		for _, r := range pc.results {
			h := p.devices[pc.node][r.Device]
			if h == nil {
				continue
			}
			if h.whole == uid {
				h.whole = ""
			}
			delete(h.shares, uid)
			if h.whole == "" && len(h.shares) == 0 {
				delete(p.devices[pc.node], r.Device)
			}
		}
		delete(p.claims, uid)
	}
}

// Holders is the kubelets' record of prepared devices: for each held
// device, "node/device", the claims that hold it (namespace/name, sorted,
// comma-separated).
func (p *prepared) Holders() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for _, pc := range p.claims {
		for _, r := range pc.results {
			key := pc.node + "/" + r.Device
			names := strings.Split(out[key], ",")
			if out[key] == "" {
				names = nil
			}
			if !slices.Contains(names, pc.name) {
				names = append(names, pc.name)
			}
			slices.Sort(names)
			out[key] = strings.Join(names, ",")
		}
	}
	return out
}
