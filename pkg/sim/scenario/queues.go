package scenario

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/queuetree"
)

// How a policy admits the work of a scenario with team queues.
const (
	// AdmissionQueues creates the scenario's queues as aischedqueues and
	// labels each namespace with its queue: the job queue admits by queue
	// (docs/queues.md).
	AdmissionQueues = "queues"
	// AdmissionResourceQuota creates no queue: each namespace of a queue
	// gets a ResourceQuota of the queue's guarantees instead, a hard cap,
	// as a cluster shared by teams is run without queues.
	AdmissionResourceQuota = "resourceQuota"
)

// QueueMetricKeys are the metrics of a shared cluster's teams
// (metrics.Teams), which a scenario with queues reports besides
// MetricKeys.
var QueueMetricKeys = []string{
	"mean_gpu_allocation_rate", "fair_share_deviation_gpus", "guarantee_wait_seconds",
	"evicted_per_reclaimed_gpu", "idle_gpu_hours_while_fit_waits", "jobs_never_started",
}

// Queue is a team queue of the scenario, with the fields of an
// aischedqueue's spec (docs/queues.md). Under admission queues it is
// created as one; under admission resourceQuota each namespace of the
// queue gets a ResourceQuota of its guarantees. The metrics of the teams
// (fair shares, guarantees) are read from the queues under either.
type Queue struct {
	// name is the queue's name; a DNS label.
	Name string `yaml:"name"`
	// parent is the parent queue's name; +optional.
	Parent string `yaml:"parent"`
	// default makes it the queue of work whose namespace names none;
	// +optional.
	Default bool `yaml:"default"`
	// usageHalfLifeSeconds counts past use against the spare share;
	// +optional, 0 to 2592000.
	UsageHalfLifeSeconds int32 `yaml:"usageHalfLifeSeconds"`
	// resources are the queue's amounts by resource; at most 8.
	Resources []QueueResource `yaml:"resources"`
}

// QueueResource is a queue's amounts of one resource.
type QueueResource struct {
	// name: cpu, memory, nvidia.com/gpu, gpu.aisched.io/shared or
	// models.gpu.aisched.io/<model>.
	Name string `yaml:"name"`
	// guaranteed, limit and lendingLimit are quantities from 0 to 1Pi;
	// +optional.
	Guaranteed   *clusterfile.Quantity `yaml:"guaranteed"`
	Limit        *clusterfile.Quantity `yaml:"limit"`
	LendingLimit *clusterfile.Quantity `yaml:"lendingLimit"`
	// weight is from 1 to 1000; +optional, default 1.
	Weight *int32 `yaml:"weight"`
}

// Bounds of a queue's fields, the Queue CRD's.
var maxQueueAmount = resource.MustParse("1Pi")

const (
	maxQueueResources = 8
	maxWeight         = 1000
	maxHalfLife       = 2592000
)

// Object is the queue as an aischedqueue.
func (q *Queue) Object() *aischedv1alpha1.Queue {
	out := &aischedv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q.Name},
		Spec: aischedv1alpha1.QueueSpec{Parent: q.Parent, Default: q.Default, UsageHalfLifeSeconds: q.UsageHalfLifeSeconds}}
	quantity := func(q *clusterfile.Quantity) *resource.Quantity {
		if q == nil {
			return nil
		}
		c := q.DeepCopy()
		return &c
	}
	for _, r := range q.Resources {
		qr := aischedv1alpha1.QueueResource{Name: r.Name, Guaranteed: quantity(r.Guaranteed), Limit: quantity(r.Limit),
			LendingLimit: quantity(r.LendingLimit)}
		if r.Weight != nil {
			w := *r.Weight
			qr.Weight = &w
		}
		out.Spec.Resources = append(out.Spec.Resources, qr)
	}
	return out
}

// QueueSpecs are the scenario's queues in the one model of team queues.
func (s *Scenario) QueueSpecs() []queuetree.Spec {
	out := make([]queuetree.Spec, 0, len(s.Queues))
	for i := range s.Queues {
		out = append(out, queuetree.SpecOf(s.Queues[i].Object()))
	}
	return out
}

// QueueOf is the queue of the work of namespace ns: the namespace's, else
// the default queue, "" for none.
func (s *Scenario) QueueOf(ns string) string {
	for _, n := range s.Namespaces {
		if n.Name == ns && n.Queue != "" {
			return n.Queue
		}
	}
	for _, q := range s.Queues {
		if q.Default {
			return q.Name
		}
	}
	return ""
}

// GuaranteeQuota is the ResourceQuota's spec.hard that stands for queue
// name's guarantees under admission resourceQuota: requests.<resource>
// of each guaranteed cpu, memory and nvidia.com/gpu (0 when the queue
// lists the resource without a guarantee). Shares and models have no
// ResourceQuota form and are left out.
func (s *Scenario) GuaranteeQuota(name string) corev1.ResourceList {
	hard := corev1.ResourceList{}
	for _, q := range s.Queues {
		if q.Name != name {
			continue
		}
		for _, r := range q.Resources {
			if r.Name != string(corev1.ResourceCPU) && r.Name != string(corev1.ResourceMemory) && r.Name != queuetree.GPU {
				continue
			}
			amount := resource.Quantity{}
			if r.Guaranteed != nil {
				amount = r.Guaranteed.DeepCopy()
			}
			hard[corev1.ResourceName("requests."+r.Name)] = amount
		}
	}
	return hard
}

// validateQueues checks the queues, the namespaces' queues and the
// policies' admissions: the fields as the Queue CRD's schema checks them,
// and the tree as the job queue does (a parent that exists, no cycle,
// children guaranteed no more than their parent, one default).
func (s *Scenario) validateQueues() field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range s.Queues {
		q := &s.Queues[i]
		qp := field.NewPath("queues").Index(i)
		errs = append(errs, dnsLabel(qp.Child("name"), q.Name)...)
		if names.Has(q.Name) {
			errs = append(errs, field.Duplicate(qp.Child("name"), q.Name))
		}
		names.Insert(q.Name)
		if q.Parent == q.Name && q.Parent != "" {
			errs = append(errs, field.Invalid(qp.Child("parent"), q.Parent, "a queue cannot be its own parent"))
		}
		if q.UsageHalfLifeSeconds < 0 || q.UsageHalfLifeSeconds > maxHalfLife {
			errs = append(errs, field.Invalid(qp.Child("usageHalfLifeSeconds"), q.UsageHalfLifeSeconds, fmt.Sprintf("must be between 0 and %d", maxHalfLife)))
		}
		errs = append(errs, validateQueueResources(qp.Child("resources"), q.Resources)...)
	}
	for i := range s.Queues {
		q := &s.Queues[i]
		if q.Parent != "" && q.Parent != q.Name && !names.Has(q.Parent) {
			errs = append(errs, field.NotFound(field.NewPath("queues").Index(i).Child("parent"), q.Parent))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, s.validateTree()...)
	}
	hasChildren := sets.New[string]()
	for _, q := range s.Queues {
		if q.Parent != "" {
			hasChildren.Insert(q.Parent)
		}
	}
	for i, ns := range s.Namespaces {
		qp := field.NewPath("namespaces").Index(i).Child("queue")
		switch {
		case ns.Queue == "":
		case !names.Has(ns.Queue):
			errs = append(errs, field.NotFound(qp, ns.Queue))
		case hasChildren.Has(ns.Queue):
			errs = append(errs, field.Invalid(qp, ns.Queue, "the queue has child queues; only leaf queues hold work"))
		}
	}
	for i, p := range s.Policies {
		ap := field.NewPath("policies").Index(i).Child("admission")
		switch {
		case p.Admission == "":
		case p.Admission != AdmissionQueues && p.Admission != AdmissionResourceQuota:
			errs = append(errs, field.NotSupported(ap, p.Admission, []string{AdmissionQueues, AdmissionResourceQuota}))
		case len(s.Queues) == 0:
			errs = append(errs, field.Invalid(ap, p.Admission, "the scenario has no queues"))
		}
	}
	return errs
}

// validateQueueResources checks one queue's resources.
func validateQueueResources(rp *field.Path, resources []QueueResource) field.ErrorList {
	var errs field.ErrorList
	if len(resources) > maxQueueResources {
		errs = append(errs, field.TooMany(rp, len(resources), maxQueueResources))
	}
	seen := sets.New[string]()
	for j, r := range resources {
		p := rp.Index(j)
		if !queueResourceName(r.Name) {
			errs = append(errs, field.NotSupported(p.Child("name"), r.Name,
				[]string{"cpu", "memory", queuetree.GPU, queuetree.SharedGPU, queuetree.ModelPrefix + "<model>"}))
		}
		if seen.Has(r.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), r.Name))
		}
		seen.Insert(r.Name)
		for _, a := range []struct {
			name string
			q    *clusterfile.Quantity
		}{{"guaranteed", r.Guaranteed}, {"limit", r.Limit}, {"lendingLimit", r.LendingLimit}} {
			switch {
			case a.q == nil:
			case a.q.Sign() < 0:
				errs = append(errs, field.Invalid(p.Child(a.name), a.q.String(), "must not be negative"))
			case a.q.Cmp(maxQueueAmount) > 0:
				errs = append(errs, field.Invalid(p.Child(a.name), a.q.String(), "must be at most 1Pi"))
			}
		}
		if r.Weight != nil && (*r.Weight < 1 || *r.Weight > maxWeight) {
			errs = append(errs, field.Invalid(p.Child("weight"), *r.Weight, fmt.Sprintf("must be between 1 and %d", maxWeight)))
		}
	}
	return errs
}

// queueResourceName reports whether a queue may list the resource (the
// Queue CRD's rule).
func queueResourceName(name string) bool {
	switch name {
	case "cpu", "memory", queuetree.GPU, queuetree.SharedGPU:
		return true
	}
	model, ok := strings.CutPrefix(name, queuetree.ModelPrefix)
	return ok && model != "" && len(validation.IsQualifiedName(model)) == 0
}

// validateTree reports what the job queue would find wrong with the tree
// (queuetree.Build's problems), at the queue's field.
func (s *Scenario) validateTree() field.ErrorList {
	_, problems := queuetree.Build(s.QueueSpecs(), nil)
	var errs field.ErrorList
	for _, p := range problems {
		i := slices.IndexFunc(s.Queues, func(q Queue) bool { return "aischedqueue "+q.Name == p.Queue })
		if i < 0 {
			continue
		}
		q := &s.Queues[i]
		path := field.NewPath("queues").Index(i)
		var value any
		switch {
		case p.Field == "spec.parent":
			path, value = path.Child("parent"), q.Parent
		case p.Field == "spec.default":
			path, value = path.Child("default"), q.Default
		case strings.HasPrefix(p.Field, "spec.resources["):
			// spec.resources[<name>].guaranteed or .limit
			name, what, _ := strings.Cut(strings.TrimPrefix(p.Field, "spec.resources["), "].")
			j := slices.IndexFunc(q.Resources, func(r QueueResource) bool { return r.Name == name })
			if j < 0 {
				continue
			}
			path, value = path.Child("resources").Index(j).Child(what), quantityString(q.Resources[j], what)
		}
		errs = append(errs, field.Invalid(path, value, p.Msg))
	}
	return errs
}

// quantityString is a resource's guaranteed or limit as written.
func quantityString(r QueueResource, what string) string {
	q := r.Guaranteed
	if what == "limit" {
		q = r.Limit
	}
	if q == nil {
		return "0"
	}
	return q.String()
}
