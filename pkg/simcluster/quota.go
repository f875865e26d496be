package simcluster

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	quota "k8s.io/apiserver/pkg/quota/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/aisched/aisched/pkg/jobqueue"
)

var quotasResource = corev1.SchemeGroupVersion.WithResource("resourcequotas")

// modelQuotas makes the fast engine's API play kube-apiserver's
// ResourceQuota admission and the quota controller for pods, counting
// each pod with upstream's pod evaluator (jobqueue.QuotaUsage): a pod
// whose usage would take a quota of its namespace past spec.hard is
// refused as the apiserver refuses it ("exceeded quota: ..."), and each
// quota's status (hard and used) follows the namespace's pods as they are
// created, end and are deleted. Quotas on other objects than pods are not
// modelled.
func (a *fakeAPI) modelQuotas() {
	tracker := a.core.Tracker()
	act := k8stesting.ObjectReaction(tracker)
	a.core.PrependReactor("create", "resourcequotas", func(action k8stesting.Action) (bool, runtime.Object, error) {
		q := action.(k8stesting.CreateAction).GetObject().(*corev1.ResourceQuota).DeepCopy()
		q.Namespace = action.GetNamespace()
		q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard.DeepCopy(), Used: a.usage(q.Namespace, q.Spec.Hard)}
		a.writes.Add(1)
		if err := tracker.Create(quotasResource, q, q.Namespace); err != nil {
			return true, nil, err
		}
		return true, q.DeepCopy(), nil
	})
	// Admission, after the pod's other admission (createPod): the quota's
	// use is charged at once, as the apiserver's admission writes it.
	a.core.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.writes.Add(1)
		if action.GetSubresource() != "" {
			return a.createPod(action)
		}
		ns := action.GetNamespace()
		pod := action.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if err := a.checkQuota(ns, pod); err != nil {
			return true, nil, err
		}
		handled, obj, err := a.createPod(action)
		if err == nil {
			a.recount(ns)
		}
		return handled, obj, err
	})
	// The quota controller: what ended or left no longer counts.
	for _, verb := range []string{"update", "patch", "delete"} {
		a.core.PrependReactor(verb, "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
			a.writes.Add(1)
			handled, obj, err := act(action)
			if err == nil {
				a.recount(action.GetNamespace())
			}
			return handled, obj, err
		})
	}
}

// quotas returns the ResourceQuotas of namespace ns.
func (a *fakeAPI) quotas(ns string) []corev1.ResourceQuota {
	obj, err := a.core.Tracker().List(quotasResource, corev1.SchemeGroupVersion.WithKind("ResourceQuota"), ns)
	if err != nil {
		return nil
	}
	return obj.(*corev1.ResourceQuotaList).Items
}

// usage is what the pods of namespace ns count of the resources of hard.
func (a *fakeAPI) usage(ns string, hard corev1.ResourceList) corev1.ResourceList {
	used := corev1.ResourceList{}
	obj, err := a.core.Tracker().List(podsResource, corev1.SchemeGroupVersion.WithKind("Pod"), ns)
	if err == nil {
		for i := range obj.(*corev1.PodList).Items {
			used = quota.Add(used, jobqueue.QuotaUsage(&obj.(*corev1.PodList).Items[i]))
		}
	}
	used = quota.Mask(used, quota.ResourceNames(hard))
	// The controller lists every resource of hard, 0 when nothing uses it.
	for _, name := range quota.ResourceNames(hard) {
		if _, ok := used[name]; !ok {
			used[name] = *resource.NewQuantity(0, resource.DecimalSI)
		}
	}
	return used
}

// checkQuota refuses a pod that would take a quota of ns past its hard
// limit, with the apiserver's words.
func (a *fakeAPI) checkQuota(ns string, pod *corev1.Pod) error {
	delta := jobqueue.QuotaUsage(pod)
	for _, q := range a.quotas(ns) {
		hard := q.Status.Hard
		requested := quota.Mask(delta, quota.ResourceNames(hard))
		next := quota.Mask(quota.Add(q.Status.Used, requested), quota.ResourceNames(requested))
		if ok, exceeded := quota.LessThanOrEqual(next, hard); !ok {
			return apierrors.NewForbidden(podsResource.GroupResource(), pod.Name, fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s",
				q.Name, prettyPrint(quota.Mask(requested, exceeded)), prettyPrint(quota.Mask(q.Status.Used, exceeded)), prettyPrint(quota.Mask(hard, exceeded))))
		}
	}
	return nil
}

// recount sets the used of every quota of ns to what its pods count now.
func (a *fakeAPI) recount(ns string) {
	for _, q := range a.quotas(ns) {
		used := a.usage(ns, q.Status.Hard)
		if equality.Semantic.DeepEqual(used, q.Status.Used) {
			continue
		}
		q.Status.Used = used
		a.writes.Add(1)
		_ = a.core.Tracker().Update(quotasResource, &q, ns)
	}
}

// prettyPrint writes a resource list as the apiserver's quota admission
// does: name=value, by name, comma-separated.
func prettyPrint(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for name, q := range l {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
