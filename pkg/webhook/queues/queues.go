// Package queues is the admission webhook of aisched's team queues
// (aischedqueues): it refuses what the CRD's schema and CEL rules cannot
// judge alone, because it needs the other queues: a parent that would
// make a cycle, children guaranteed more than their parent, and a queue
// that holds work turned into a parent. The job queue reports the same on
// a queue's Valid condition where the webhook is not installed.
package queues

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
)

// Path is the webhook's path.
const Path = "/validate-aisched-io-v1alpha1-aischedqueue"

// maxDepth bounds the walk up a queue's parents.
const maxDepth = 64

// ValidatingWebhook is the webhook for aischedqueues, reached through
// clientConfig. It runs when a queue is created or changed, never on
// pods.
func ValidatingWebhook(clientConfig admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:         "aischedqueues.aisched.io",
		ClientConfig: clientConfig,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{aischedv1alpha1.GroupName},
				APIVersions: []string{aischedv1alpha1.SchemeGroupVersion.Version},
				Resources:   []string{"aischedqueues"},
				Scope:       ptr.To(admissionregistrationv1.ClusterScope),
			},
		}},
		// Fail closed: a queue the webhook could not check would reach
		// the job queue, which reports it in the queue's status instead.
		FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds:          ptr.To[int32](5),
	}
}

// Handlers returns the webhook's handler by path. reader must read from
// the apiserver, not a cache: a parent created a moment before its child
// must be found.
func Handlers(scheme *runtime.Scheme, reader client.Reader) map[string]http.Handler {
	return map[string]http.Handler{Path: admission.WithValidator[*aischedv1alpha1.Queue](scheme, &Validator{Reader: reader})}
}

// Validator checks a queue against the others.
type Validator struct{ Reader client.Reader }

var _ admission.Validator[*aischedv1alpha1.Queue] = &Validator{}

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(ctx context.Context, q *aischedv1alpha1.Queue) (admission.Warnings, error) {
	return v.validate(ctx, q)
}

// ValidateUpdate implements admission.Validator.
func (v *Validator) ValidateUpdate(ctx context.Context, _, q *aischedv1alpha1.Queue) (admission.Warnings, error) {
	return v.validate(ctx, q)
}

// ValidateDelete implements admission.Validator.
func (v *Validator) ValidateDelete(context.Context, *aischedv1alpha1.Queue) (admission.Warnings, error) {
	return nil, nil
}

func (v *Validator) validate(ctx context.Context, q *aischedv1alpha1.Queue) (admission.Warnings, error) {
	var list aischedv1alpha1.QueueList
	if err := v.Reader.List(ctx, &list); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing aischedqueues: %w", err))
	}
	byName := map[string]*aischedv1alpha1.Queue{}
	children := map[string][]*aischedv1alpha1.Queue{}
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name == q.Name {
			continue
		}
		byName[o.Name] = o
	}
	byName[q.Name] = q
	for _, o := range byName {
		if o.Spec.Parent != "" {
			children[o.Spec.Parent] = append(children[o.Spec.Parent], o)
		}
	}
	var errs field.ErrorList
	var warnings admission.Warnings
	parentPath := field.NewPath("spec", "parent")
	if p := q.Spec.Parent; p != "" {
		parent, ok := byName[p]
		switch {
		case !ok:
			warnings = append(warnings, fmt.Sprintf("spec.parent: aischedqueue %s does not exist (yet); the queue holds no work until it does", p))
		default:
			if cycle := cycleFrom(q, byName); cycle != "" {
				errs = append(errs, field.Invalid(parentPath, p, "the queues would form a cycle of parents: "+cycle))
			}
			if held := parent.Status.AdmittedGroups + parent.Status.WaitingGroups; held > 0 && len(children[p]) == 1 {
				errs = append(errs, field.Invalid(parentPath, p, fmt.Sprintf("aischedqueue %s holds work (%d pod groups and pods admitted or waiting): a queue with work cannot become a parent; move its work to a leaf queue first", p, held)))
			}
			errs = append(errs, overGuaranteed(parent, children[p], field.NewPath("spec", "resources"), q.Name)...)
		}
	}
	errs = append(errs, overGuaranteed(q, children[q.Name], field.NewPath("spec", "resources"), "")...)
	if len(errs) == 0 {
		return warnings, nil
	}
	return warnings, apierrors.NewInvalid(aischedv1alpha1.SchemeGroupVersion.WithKind("Queue").GroupKind(), q.Name, errs)
}

// cycleFrom walks up from q and returns the cycle it meets ("a -> b ->
// a"), "" for none.
func cycleFrom(q *aischedv1alpha1.Queue, byName map[string]*aischedv1alpha1.Queue) string {
	seen := []string{q.Name}
	for cur := q; cur.Spec.Parent != "" && len(seen) <= maxDepth; {
		next, ok := byName[cur.Spec.Parent]
		if !ok {
			return ""
		}
		seen = append(seen, next.Name)
		if next.Name == q.Name {
			return strings.Join(seen, " -> ")
		}
		cur = next
	}
	return ""
}

// overGuaranteed reports each resource parent lists whose children are
// guaranteed more than it: on the parent's field when the parent is the
// queue checked (child ""), else on the child's.
func overGuaranteed(parent *aischedv1alpha1.Queue, kids []*aischedv1alpha1.Queue, resources *field.Path, child string) field.ErrorList {
	var errs field.ErrorList
	for i, r := range parent.Spec.Resources {
		own := quantity(r.Guaranteed)
		var sum resource.Quantity
		for _, k := range kids {
			for _, kr := range k.Spec.Resources {
				if kr.Name == r.Name {
					sum.Add(quantity(kr.Guaranteed))
				}
			}
		}
		if sum.Cmp(own) <= 0 {
			continue
		}
		msg := fmt.Sprintf("the children of aischedqueue %s are guaranteed %s of %s, more than its own %s", parent.Name, sum.String(), r.Name, own.String())
		if child == "" {
			errs = append(errs, field.Invalid(resources.Index(i).Child("guaranteed"), own.String(), msg))
		} else {
			errs = append(errs, field.Invalid(resources.Key(r.Name).Child("guaranteed"), sum.String(), msg))
		}
	}
	return errs
}

func quantity(q *resource.Quantity) resource.Quantity {
	if q == nil {
		return resource.Quantity{}
	}
	return *q
}
