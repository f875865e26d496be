package jobqueue

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/aisched/aisched/pkg/queuetree"
)

// peerForm is a peer scheduler's queue: its resource, how a pod names it,
// and its translation into the one model. Each peer has one translator,
// here at the edge; the queue reads only the model.
type peerForm struct {
	peer     string
	resource schema.GroupVersionResource
	// prefix distinguishes the peer's queue names in the tree.
	prefix string
	// object is how messages name the peer's queue kind.
	object string
	// podKey is the label (KAI) or annotation (Volcano) of a pod that
	// names its queue.
	podKey string
}

// spec translates one of the peer's queues into the model.
func (f peerForm) spec(u *unstructured.Unstructured) queuetree.Spec {
	if f.prefix == kaiPrefix {
		return kaiSpec(u)
	}
	return volcanoSpec(u)
}

// The prefixes of peers' queue names in the tree, and how messages name
// their queues.
const (
	volcanoPrefix = "volcano/"
	volcanoObject = "Volcano Queue"
	kaiPrefix     = "kai/"
	kaiObject     = "KAI Queue"
)

// volcanoQueues are Volcano's Queues (scheduling.volcano.sh/v1beta1),
// named by a pod's annotation scheduling.volcano.sh/queue-name. Their
// meaning in the model: spec.deserved (the capacity plugin's entitlement,
// reclaimed up to) or else spec.guarantee.resource is the guarantee,
// spec.capability the limit, spec.weight the weight of every resource,
// spec.parent the parent (Volcano's root queue is a queue like any),
// spec.reclaimable: false keeps what the queue borrowed from being taken
// back, and the queue named default is the default of Volcano's form.
var volcanoQueues = peerForm{
	peer:     "Volcano",
	resource: schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"},
	prefix:   volcanoPrefix,
	object:   volcanoObject,
	podKey:   "scheduling.volcano.sh/queue-name",
}

func volcanoSpec(u *unstructured.Unstructured) queuetree.Spec {
	name := u.GetName()
	s := queuetree.Spec{Name: volcanoPrefix + name, Object: volcanoObject + " " + name,
		Default: name == "default", Resources: map[string]queuetree.Amounts{}}
	if parent, _, _ := unstructured.NestedString(u.Object, "spec", "parent"); parent != "" && parent != name {
		s.Parent = volcanoPrefix + parent
	}
	if r, ok, _ := unstructured.NestedBool(u.Object, "spec", "reclaimable"); ok && !r {
		s.NotReclaimable = true
	}
	weight, ok, _ := unstructured.NestedInt64(u.Object, "spec", "weight")
	if !ok || weight < 1 {
		weight = 1
	}
	weight = min(weight, 1000)
	deserved := resourceList(u, "spec", "deserved")
	guarantee := resourceList(u, "spec", "guarantee", "resource")
	capability := resourceList(u, "spec", "capability")
	for _, list := range []map[string]resource.Quantity{deserved, guarantee, capability} {
		for name := range list {
			if _, ok := s.Resources[name]; ok {
				continue
			}
			a := queuetree.Amounts{Limit: queuetree.Unlimited, Lending: queuetree.Unlimited, Weight: weight}
			if q, ok := deserved[name]; ok {
				a.Guaranteed = queuetree.Base(name, q)
			} else if q, ok := guarantee[name]; ok {
				a.Guaranteed = queuetree.Base(name, q)
			}
			if q, ok := capability[name]; ok {
				a.Limit = max(queuetree.Base(name, q), a.Guaranteed)
			}
			s.Resources[name] = a
		}
	}
	return s
}

// resourceList reads a ResourceList of the resources the model accounts
// (cpu, memory, nvidia.com/gpu); others, and amounts that do not parse,
// are left out.
func resourceList(u *unstructured.Unstructured, fields ...string) map[string]resource.Quantity {
	m, _, _ := unstructured.NestedMap(u.Object, fields...)
	out := map[string]resource.Quantity{}
	for name, v := range m {
		if name != "cpu" && name != "memory" && name != queuetree.GPU {
			continue
		}
		var q resource.Quantity
		var err error
		switch x := v.(type) {
		case string:
			q, err = resource.ParseQuantity(x)
		case int64:
			q = *resource.NewQuantity(x, resource.DecimalSI)
		case float64:
			q = *resource.NewMilliQuantity(int64(math.Round(x*1000)), resource.DecimalSI)
		default:
			continue
		}
		if err == nil && q.Sign() >= 0 {
			out[name] = q
		}
	}
	return out
}

// kaiQueues are KAI-Scheduler's Queues (scheduling.run.ai/v2), named by a
// pod's label kai.scheduler/queue. Their meaning in the model: for gpu
// (GPUs), cpu (millicores) and memory (MB, 10^6 bytes),
// spec.resources.<r>.quota is the guarantee (-1, "no quota", leaves the
// resource unaccounted), limit the limit (-1: none), overQuotaWeight the
// weight (0: the queue does not go over its quota, so its limit is its
// quota); spec.parentQueue is the parent and spec.priority the over-quota
// priority (higher first).
var kaiQueues = peerForm{
	peer:     "KAI-Scheduler",
	resource: schema.GroupVersionResource{Group: "scheduling.run.ai", Version: "v2", Resource: "queues"},
	prefix:   kaiPrefix,
	object:   kaiObject,
	podKey:   "kai.scheduler/queue",
}

func kaiSpec(u *unstructured.Unstructured) queuetree.Spec {
	name := u.GetName()
	s := queuetree.Spec{Name: kaiPrefix + name, Object: kaiObject + " " + name, Resources: map[string]queuetree.Amounts{}}
	if parent, _, _ := unstructured.NestedString(u.Object, "spec", "parentQueue"); parent != "" && parent != name {
		s.Parent = kaiPrefix + parent
	}
	if p, ok := number(u, "spec", "priority"); ok {
		s.Priority = int32(max(min(p, 1e6), -1e6))
	}
	for _, r := range []struct {
		field, name string
		unit        float64
	}{{"gpu", queuetree.GPU, 1000}, {"cpu", "cpu", 1}, {"memory", "memory", 1e6}} {
		quota, ok := number(u, "spec", "resources", r.field, "quota")
		if !ok || quota < 0 {
			continue
		}
		a := queuetree.Amounts{Guaranteed: scaled(quota, r.unit), Limit: queuetree.Unlimited, Lending: queuetree.Unlimited, Weight: 1}
		if limit, ok := number(u, "spec", "resources", r.field, "limit"); ok && limit >= 0 {
			a.Limit = max(scaled(limit, r.unit), a.Guaranteed)
		}
		if w, ok := number(u, "spec", "resources", r.field, "overQuotaWeight"); ok {
			if w <= 0 {
				a.Limit = a.Guaranteed
			} else {
				a.Weight = int64(min(math.Round(w), 1000))
			}
		}
		s.Resources[r.name] = a
	}
	return s
}

// number reads a JSON number (an integer or not) of an unstructured object.
func number(u *unstructured.Unstructured, fields ...string) (float64, bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, fields...)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	}
	return 0, false
}

// scaled is v units in the model's base unit, bounded (1e15).
func scaled(v, unit float64) int64 {
	return int64(min(v*unit, 1e15))
}
