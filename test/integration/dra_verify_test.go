package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	"github.com/aisched/aisched/pkg/local"
)

// publishedDevice is a device of a ResourceSlice and the node it is on.
type publishedDevice struct {
	node   string
	device *resourcev1.Device
}

// checkAllocations fails the test when an allocated claim of the cluster
// holds what upstream's allocator would not give it (allocationErrors).
func checkAllocations(t *testing.T, c *local.Cluster) {
	t.Helper()
	errs, err := allocationErrors(context.Background(), c.Client)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// allocationErrors says what the allocated claims hold that upstream's
// allocator would not give them: a device not of NVIDIA's driver, not
// published on the node the allocation holds the pod to, not selected by
// the request's class and selectors (evaluated with upstream's CEL
// library), tainted, given whole to two claims or whole and shared,
// shared beyond its capacity, partitions beyond their card's counters, a
// request given another count of devices, or results that break a
// matchAttribute constraint.
func allocationErrors(ctx context.Context, cs kubernetes.Interface) ([]string, error) {
	sliceList, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	classList, err := cs.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	claimList, err := cs.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
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
	check := allocationCheck{devices: devices, classes: classes, cache: cel.NewCache(32, cel.Features{EnableConsumableCapacity: true}),
		whole: map[string]string{}, shares: map[string]map[resourcev1.QualifiedName]int64{}, used: map[string]map[string]int64{}}
	for i := range claimList.Items {
		if cl := &claimList.Items[i]; cl.Status.Allocation != nil {
			check.claim(cl)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(check.shares)) {
		for _, name := range slices.Sorted(maps.Keys(check.shares[key])) {
			sum := check.shares[key][name]
			if have := devices[key].device.Capacity[name].Value; sum > have.Value() {
				check.fail("device %s: its shares consume %d of %s, it has %d", key, sum, name, have.Value())
			}
		}
	}
	for _, set := range slices.Sorted(maps.Keys(check.used)) {
		for _, name := range slices.Sorted(maps.Keys(check.used[set])) {
			sum := check.used[set][name]
			if sum > counters[set][name] {
				check.fail("counter set %s: its partitions consume %d of %s, it has %d", set, sum, name, counters[set][name])
			}
		}
	}
	return check.errs, nil
}

// allocationCheck is what checkAllocations has seen of the claims so far.
type allocationCheck struct {
	errs    []string
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
	name := cl.Namespace + "/" + cl.Name
	node := allocatedNode(cl.Status.Allocation)
	given := map[string]int64{}
	for _, r := range cl.Status.Allocation.Devices.Results {
		key := r.Driver + "/" + r.Pool + "/" + r.Device
		where := fmt.Sprintf("claim %s, request %s, device %s", name, r.Request, key)
		d, ok := a.devices[key]
		switch {
		case r.Driver != nvidiadra.Driver:
			a.fail("%s: not of NVIDIA's driver", where)
			continue
		case !ok:
			a.fail("%s: no such device published", where)
			continue
		case d.node != node:
			a.fail("%s: the device is on node %s, the allocation holds the pod to %q", where, d.node, node)
		}
		given[r.Request]++
		req, err := exactRequest(cl, r.Request)
		if err != nil {
			a.fail("%s: %v", where, err)
			continue
		}
		class := a.classes[req.DeviceClassName]
		if class == nil {
			a.fail("%s: no device class %s", where, req.DeviceClassName)
			continue
		}
		for _, sel := range append(append([]resourcev1.DeviceSelector(nil), class.Spec.Selectors...), req.Selectors...) {
			if err := a.selects(sel, r.Driver, d.device); err != nil {
				a.fail("%s: %v", where, err)
			}
		}
		for _, taint := range d.device.Taints {
			if taint.Effect != resourcev1.DeviceTaintEffectNone && !tolerated(req.Tolerations, taint) {
				a.fail("%s: the device has the taint %s, which the request does not tolerate", where, taint.Key)
			}
		}
		a.hold(where, key, name, r, d.device)
	}
	for reqName, n := range given {
		if req, err := exactRequest(cl, reqName); err == nil && req.AllocationMode != resourcev1.DeviceAllocationModeAll && n != req.Count {
			a.fail("claim %s, request %s: %d devices, the request asks for %d", name, reqName, n, req.Count)
		}
	}
	for _, cons := range cl.Spec.Devices.Constraints {
		if cons.MatchAttribute != nil {
			a.matchAttribute(cl, cons)
		}
	}
}

func (a *allocationCheck) fail(format string, args ...any) {
	a.errs = append(a.errs, fmt.Sprintf(format, args...))
}

// selects says why a selector does not select the device, nil when it does.
func (a *allocationCheck) selects(sel resourcev1.DeviceSelector, driver string, d *resourcev1.Device) error {
	if sel.CEL == nil {
		return nil
	}
	expr := a.cache.GetOrCompile(sel.CEL.Expression)
	if expr.Error != nil {
		return fmt.Errorf("selector %q: %w", sel.CEL.Expression, expr.Error)
	}
	ok, _, err := expr.DeviceMatches(context.Background(), cel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations,
		Attributes: d.Attributes, Capacity: d.Capacity})
	switch {
	case err != nil:
		return fmt.Errorf("selector %q: %w", sel.CEL.Expression, err)
	case !ok:
		return fmt.Errorf("selector %q does not select the device", sel.CEL.Expression)
	}
	return nil
}

// hold records that claim name holds the device of result r, whole or a
// share, and the counters it consumes; a device given twice fails.
func (a *allocationCheck) hold(where, key, name string, r resourcev1.DeviceRequestAllocationResult, d *resourcev1.Device) {
	switch {
	case r.ShareID == nil && a.whole[key] != "" && a.whole[key] != name:
		a.fail("%s: given whole twice, also to claim %s", where, a.whole[key])
	case r.ShareID == nil && a.shares[key] != nil:
		a.fail("%s: given whole, and shared with other claims", where)
	case r.ShareID != nil && a.whole[key] != "":
		a.fail("%s: shared, and given whole to claim %s", where, a.whole[key])
	case r.ShareID != nil && !ptr.Deref(d.AllowMultipleAllocations, false):
		a.fail("%s: shared, but the device does not allow multiple allocations", where)
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
		a.fail("claim %s/%s: its devices have %d values of %s, the constraint asks one: %v", cl.Namespace, cl.Name, len(values), *cons.MatchAttribute, values)
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

// TestAllocationErrors shows that allocationErrors finds each kind of
// allocation upstream's allocator would not make, and nothing in one it
// would.
func TestAllocationErrors(t *testing.T) {
	cards := []gpu.Card{
		{Index: 0, UUID: "GPU-0", Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, ComputeCapability: 8, Healthy: true},
		{Index: 1, UUID: "GPU-1", Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, ComputeCapability: 8, Healthy: false},
	}
	exact := func(class, selector string, count int64) resourcev1.DeviceRequest {
		e := &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}
		if selector != "" {
			e.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: selector}}}
		}
		return resourcev1.DeviceRequest{Name: "r", Exactly: e}
	}
	claim := func(name, node string, req resourcev1.DeviceRequest, results ...resourcev1.DeviceRequestAllocationResult) *resourcev1.ResourceClaim {
		cl := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}}}}
		cl.Status.Allocation = &resourcev1.AllocationResult{NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}
		cl.Status.Allocation.Devices.Results = results
		return cl
	}
	result := func(pool, device string) resourcev1.DeviceRequestAllocationResult {
		return resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: nvidiadra.Driver, Pool: pool, Device: device}
	}
	share := func(pool, device, memory string) resourcev1.DeviceRequestAllocationResult {
		r := result(pool, device)
		r.ShareID = ptr.To(types.UID(memory + "-" + device))
		r.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}
		return r
	}
	gpuClass := func(selector string) resourcev1.DeviceRequest { return exact(nvidiadra.GPUClass, selector, 1) }
	migClass := exact(nvidiadra.MIGClass, "", 1)
	sameParent := func(cl *resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
		cl.Spec.Devices.Requests = append(cl.Spec.Devices.Requests, cl.Spec.Devices.Requests[0])
		cl.Spec.Devices.Requests[1].Name = "r2"
		cl.Status.Allocation.Devices.Results[1].Request = "r2"
		cl.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To[resourcev1.FullyQualifiedName]("gpu.nvidia.com/parentUUID")}}
		return cl
	}
	for _, tc := range []struct {
		name   string
		claims []*resourcev1.ResourceClaim
		want   []string
	}{
		{name: "valid", claims: []*resourcev1.ResourceClaim{
			claim("a", "n1", gpuClass("device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')"), result("n1", "gpu-0")),
			claim("b", "shm", gpuClass(""), share("shm", "gpu-0", "20Gi")),
			claim("c", "shm", gpuClass(""), share("shm", "gpu-0", "20Gi")),
			sameParent(claim("d", "mig", migClass, result("mig", "gpu-0-mig-1g5gb-19-0"), result("mig", "gpu-0-mig-2g10gb-14-2"))),
		}},
		{name: "given twice", claims: []*resourcev1.ResourceClaim{
			claim("a", "n1", gpuClass(""), result("n1", "gpu-0")), claim("b", "n1", gpuClass(""), result("n1", "gpu-0"))},
			want: []string{"claim ns/b, request r, device gpu.nvidia.com/n1/gpu-0: given whole twice, also to claim ns/a"}},
		{name: "not selected", claims: []*resourcev1.ResourceClaim{claim("a", "n1", gpuClass("device.attributes['gpu.nvidia.com'].productName == 'H100'"), result("n1", "gpu-0"))},
			want: []string{`claim ns/a, request r, device gpu.nvidia.com/n1/gpu-0: selector "device.attributes['gpu.nvidia.com'].productName == 'H100'" does not select the device`}},
		{name: "other class", claims: []*resourcev1.ResourceClaim{claim("a", "n1", migClass, result("n1", "gpu-0"))},
			want: []string{`claim ns/a, request r, device gpu.nvidia.com/n1/gpu-0: selector "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'" does not select the device`}},
		{name: "other node", claims: []*resourcev1.ResourceClaim{claim("a", "n2", gpuClass(""), result("n1", "gpu-0"))},
			want: []string{`claim ns/a, request r, device gpu.nvidia.com/n1/gpu-0: the device is on node n1, the allocation holds the pod to "n2"`}},
		{name: "tainted", claims: []*resourcev1.ResourceClaim{claim("a", "n1", gpuClass(""), result("n1", "gpu-1"))},
			want: []string{"claim ns/a, request r, device gpu.nvidia.com/n1/gpu-1: the device has the taint gpu.nvidia.com/xid, which the request does not tolerate"}},
		{name: "too few", claims: []*resourcev1.ResourceClaim{claim("a", "n1", exact(nvidiadra.GPUClass, "", 2), result("n1", "gpu-0"))},
			want: []string{"claim ns/a, request r: 1 devices, the request asks for 2"}},
		{name: "shared beyond capacity", claims: []*resourcev1.ResourceClaim{
			claim("a", "shm", gpuClass(""), share("shm", "gpu-0", "30Gi")), claim("b", "shm", gpuClass(""), share("shm", "gpu-0", "20Gi"))},
			want: []string{"device gpu.nvidia.com/shm/gpu-0: its shares consume 53687091200 of memory, it has 42949672960"}},
		{name: "whole and shared", claims: []*resourcev1.ResourceClaim{
			claim("a", "shm", gpuClass(""), share("shm", "gpu-0", "20Gi")), claim("b", "shm", gpuClass(""), result("shm", "gpu-0"))},
			want: []string{"claim ns/b, request r, device gpu.nvidia.com/shm/gpu-0: given whole, and shared with other claims"}},
		{name: "partitions beyond the counters", claims: []*resourcev1.ResourceClaim{
			claim("a", "mig", gpuClass(""), result("mig", "gpu-0")), claim("b", "mig", migClass, result("mig", "gpu-0-mig-1g5gb-19-0"))},
			// The whole card and a 1g.5gb: 40Gi+5Gi of memory, memory
			// slice 0 twice, 98+14 multiprocessors.
			want: []string{
				"counter set mig/gpu-0-counter-set: its partitions consume 48318382080 of memory, it has 42949672960",
				"counter set mig/gpu-0-counter-set: its partitions consume 2 of memory-slice-0, it has 1",
				"counter set mig/gpu-0-counter-set: its partitions consume 112 of multiprocessors, it has 98"}},
		{name: "two cards against matchAttribute", claims: []*resourcev1.ResourceClaim{
			sameParent(claim("a", "mig", migClass, result("mig", "gpu-0-mig-1g5gb-19-0"), result("mig", "gpu-1-mig-1g5gb-19-0")))},
			want: []string{"claim ns/a: its devices have 2 values of gpu.nvidia.com/parentUUID, the constraint asks one"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, c := range nvidiadra.DeviceClasses() {
				objs = append(objs, c)
			}
			healthy := []gpu.Card{cards[0], cards[0]}
			healthy[1].Index, healthy[1].UUID = 1, "GPU-1"
			for _, sl := range slices.Concat(nvidiadra.Slices("n1", cards, nvidiadra.Options{}),
				nvidiadra.Slices("shm", cards[:1], nvidiadra.Options{ConsumableShares: nvidiadra.SharingMemory}),
				nvidiadra.Slices("mig", healthy, nvidiadra.Options{DynamicMIG: true})) {
				objs = append(objs, sl)
			}
			for _, cl := range tc.claims {
				objs = append(objs, cl)
			}
			got, err := allocationErrors(context.Background(), fake.NewClientset(objs...))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors %q, want %q", len(got), got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d: got %q, want it to start %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}
