package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	"github.com/aisched/aisched/pkg/local"
)

// publishedDevice is a device of a ResourceSlice and the node it is on.
type publishedDevice struct {
	node   string
	device *resourcev1.Device
}

// checkAllocations fails the test when an allocated claim of the cluster
// holds what upstream's allocator would not give it: a device not of
// NVIDIA's driver, not published on the node the allocation holds the pod
// to, not selected by the request's class and selectors (evaluated with
// upstream's CEL library), tainted, given whole to two claims or whole and
// shared, shared beyond its capacity, partitions beyond their card's
// counters, a request given another count of devices, or results that
// break a matchAttribute constraint.
func checkAllocations(t *testing.T, c *local.Cluster) {
	t.Helper()
	ctx := context.Background()
	sliceList, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	classList, err := c.Client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimList, err := c.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	devices := map[string]publishedDevice{}
	counters := map[string]map[string]int64{}
	for i := range sliceList.Items {
		sl := &sliceList.Items[i]
		for j := range sl.Spec.Devices {
			devices[sl.Spec.Driver+"/"+sl.Spec.Pool.Name+"/"+sl.Spec.Devices[j].Name] = publishedDevice{ptr.Deref(sl.Spec.NodeName, ""), &sl.Spec.Devices[j]}
		}
		for _, cs := range sl.Spec.SharedCounters {
			counters[sl.Spec.Pool.Name+"/"+cs.Name] = map[string]int64{}
			for name, v := range cs.Counters {
				counters[sl.Spec.Pool.Name+"/"+cs.Name][name] = v.Value.Value()
			}
		}
	}
	classes := map[string]*resourcev1.DeviceClass{}
	for i := range classList.Items {
		classes[classList.Items[i].Name] = &classList.Items[i]
	}
	check := allocationCheck{t: t, devices: devices, classes: classes, cache: cel.NewCache(32, cel.Features{EnableConsumableCapacity: true}),
		whole: map[string]string{}, shares: map[string]map[resourcev1.QualifiedName]int64{}, used: map[string]map[string]int64{}}
	for i := range claimList.Items {
		if cl := &claimList.Items[i]; cl.Status.Allocation != nil {
			check.claim(cl)
		}
	}
	for key, consumed := range check.shares {
		for name, sum := range consumed {
			if have := devices[key].device.Capacity[name].Value; sum > have.Value() {
				t.Errorf("device %s: its shares consume %d of %s, it has %d", key, sum, name, have.Value())
			}
		}
	}
	for set, used := range check.used {
		for name, sum := range used {
			if sum > counters[set][name] {
				t.Errorf("counter set %s: its partitions consume %d of %s, it has %d", set, sum, name, counters[set][name])
			}
		}
	}
}

// allocationCheck is what checkAllocations has seen of the claims so far.
type allocationCheck struct {
	t       *testing.T
	devices map[string]publishedDevice
	classes map[string]*resourcev1.DeviceClass
	cache   *cel.Cache
	// whole is the claim that holds each device whole; shares what the
	// shares of each shared device consume, and used what the devices
	// held consume of each counter set.
	whole  map[string]string
	shares map[string]map[resourcev1.QualifiedName]int64
	used   map[string]map[string]int64
}

// claim checks one allocated claim's results.
func (a *allocationCheck) claim(cl *resourcev1.ResourceClaim) {
	t := a.t
	t.Helper()
	name := cl.Namespace + "/" + cl.Name
	node := allocatedNode(cl.Status.Allocation)
	given := map[string]int64{}
	for _, r := range cl.Status.Allocation.Devices.Results {
		key := r.Driver + "/" + r.Pool + "/" + r.Device
		where := fmt.Sprintf("claim %s, request %s, device %s", name, r.Request, key)
		d, ok := a.devices[key]
		switch {
		case r.Driver != nvidiadra.Driver:
			t.Errorf("%s: not of NVIDIA's driver", where)
			continue
		case !ok:
			t.Errorf("%s: no such device published", where)
			continue
		case d.node != node:
			t.Errorf("%s: the device is on node %s, the allocation holds the pod to %q", where, d.node, node)
		}
		given[r.Request]++
		req, err := exactRequest(cl, r.Request)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		class := a.classes[req.DeviceClassName]
		if class == nil {
			t.Errorf("%s: no device class %s", where, req.DeviceClassName)
			continue
		}
		for _, sel := range append(append([]resourcev1.DeviceSelector(nil), class.Spec.Selectors...), req.Selectors...) {
			if err := a.selects(sel, r.Driver, d.device); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
		for _, taint := range d.device.Taints {
			if taint.Effect != resourcev1.DeviceTaintEffectNone && !tolerated(req.Tolerations, taint) {
				t.Errorf("%s: the device has the taint %s, which the request does not tolerate", where, taint.Key)
			}
		}
		a.hold(where, key, name, r, d.device)
	}
	for reqName, n := range given {
		if req, err := exactRequest(cl, reqName); err == nil && req.AllocationMode != resourcev1.DeviceAllocationModeAll && n != req.Count {
			t.Errorf("claim %s, request %s: %d devices, the request asks for %d", name, reqName, n, req.Count)
		}
	}
	for _, cons := range cl.Spec.Devices.Constraints {
		if cons.MatchAttribute != nil {
			a.matchAttribute(cl, cons)
		}
	}
}

// selects says why a selector does not select the device, nil when it does.
func (a *allocationCheck) selects(sel resourcev1.DeviceSelector, driver string, d *resourcev1.Device) error {
	if sel.CEL == nil {
		return nil
	}
	expr := a.cache.GetOrCompile(sel.CEL.Expression)
	if expr.Error != nil {
		return fmt.Errorf("selector %q: %v", sel.CEL.Expression, expr.Error)
	}
	ok, _, err := expr.DeviceMatches(context.Background(), cel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations,
		Attributes: d.Attributes, Capacity: d.Capacity})
	switch {
	case err != nil:
		return fmt.Errorf("selector %q: %v", sel.CEL.Expression, err)
	case !ok:
		return fmt.Errorf("selector %q does not select the device", sel.CEL.Expression)
	}
	return nil
}

// hold records that claim name holds the device of result r, whole or a
// share, and the counters it consumes; a device given twice fails.
func (a *allocationCheck) hold(where, key, name string, r resourcev1.DeviceRequestAllocationResult, d *resourcev1.Device) {
	t := a.t
	t.Helper()
	switch {
	case r.ShareID == nil && a.whole[key] != "" && a.whole[key] != name:
		t.Errorf("%s: given whole twice, also to claim %s", where, a.whole[key])
	case r.ShareID == nil && a.shares[key] != nil:
		t.Errorf("%s: given whole, and shared with other claims", where)
	case r.ShareID != nil && a.whole[key] != "":
		t.Errorf("%s: shared, and given whole to claim %s", where, a.whole[key])
	case r.ShareID != nil && !ptr.Deref(d.AllowMultipleAllocations, false):
		t.Errorf("%s: shared, but the device does not allow multiple allocations", where)
	}
	if r.ShareID == nil {
		a.whole[key] = name
	} else {
		if a.shares[key] == nil {
			a.shares[key] = map[resourcev1.QualifiedName]int64{}
		}
		for capName, q := range r.ConsumedCapacity {
			a.shares[key][capName] += q.Value()
		}
	}
	for _, cc := range d.ConsumesCounters {
		set := r.Pool + "/" + cc.CounterSet
		if a.used[set] == nil {
			a.used[set] = map[string]int64{}
		}
		for counter, v := range cc.Counters {
			a.used[set][counter] += v.Value.Value()
		}
	}
}

// matchAttribute checks that the results of the constraint's requests
// (all, when it names none) have one value of its attribute.
func (a *allocationCheck) matchAttribute(cl *resourcev1.ResourceClaim, cons resourcev1.DeviceConstraint) {
	t := a.t
	t.Helper()
	domain, id := nvidiadra.Driver, string(*cons.MatchAttribute)
	if before, after, ok := strings.Cut(id, "/"); ok {
		domain, id = before, after
	}
	values := map[string]string{}
	for _, r := range cl.Status.Allocation.Devices.Results {
		parent, _, _ := strings.Cut(r.Request, "/")
		if len(cons.Requests) > 0 && !slices.Contains(cons.Requests, parent) {
			continue
		}
		d := a.devices[r.Driver+"/"+r.Pool+"/"+r.Device].device
		if d == nil || r.Driver != domain {
			continue
		}
		attr := d.Attributes[resourcev1.QualifiedName(id)]
		values[fmt.Sprint(ptr.Deref(attr.StringValue, ""), ptr.Deref(attr.VersionValue, ""), ptr.Deref(attr.IntValue, 0), ptr.Deref(attr.BoolValue, false))] = r.Device
	}
	if len(values) > 1 {
		t.Errorf("claim %s/%s: its devices have %d values of %s, the constraint asks one: %v", cl.Namespace, cl.Name, len(values), *cons.MatchAttribute, values)
	}
}

// exactRequest is the exact request (or subrequest, "request/sub") of the
// claim a result names.
func exactRequest(cl *resourcev1.ResourceClaim, name string) (*resourcev1.ExactDeviceRequest, error) {
	parent, sub, hasSub := strings.Cut(name, "/")
	for i := range cl.Spec.Devices.Requests {
		req := &cl.Spec.Devices.Requests[i]
		if req.Name != parent {
			continue
		}
		if !hasSub && req.Exactly != nil {
			return req.Exactly, nil
		}
		for j := range req.FirstAvailable {
			if s := &req.FirstAvailable[j]; hasSub && s.Name == sub {
				return &resourcev1.ExactDeviceRequest{DeviceClassName: s.DeviceClassName, Selectors: s.Selectors, AllocationMode: s.AllocationMode,
					Count: s.Count, Tolerations: s.Tolerations, Capacity: s.Capacity}, nil
			}
		}
	}
	return nil, fmt.Errorf("the claim has no request %s", name)
}

// tolerated reports whether a toleration of the list tolerates the taint.
func tolerated(list []resourcev1.DeviceToleration, taint resourcev1.DeviceTaint) bool {
	for _, tol := range list {
		if (tol.Key == "" || tol.Key == taint.Key) && (tol.Effect == "" || tol.Effect == taint.Effect) &&
			(tol.Operator == resourcev1.DeviceTolerationOpExists || tol.Value == taint.Value) {
			return true
		}
	}
	return false
}
