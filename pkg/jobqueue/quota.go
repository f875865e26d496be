package jobqueue

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// checkQuota reports whether the whole group fits every ResourceQuota of
// its namespace: for each resource a quota limits, what other pods use
// plus what the whole group asks for must not exceed spec.hard. The group
// is its members' requests; a group still missing members counts each
// missing one like its largest member per resource, and a PodGroup's
// minResources is a floor. Quotas on limits and object counts other than
// pods are left to the apiserver.
func checkQuota(g Group, quotas []Quota) (string, bool) {
	if len(quotas) == 0 || slices.ContainsFunc(g.Pending, KueueManaged) || slices.ContainsFunc(g.Bound, KueueManaged) {
		return "", true
	}
	own, whole := groupRequests(g)
	for _, q := range quotas {
		names := make([]corev1.ResourceName, 0, len(q.Hard))
		for name := range q.Hard {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			res, ok := quotaResource(name)
			if !ok {
				continue
			}
			need, ok := whole[res]
			if !ok || need.IsZero() {
				continue
			}
			used := q.Used[name].DeepCopy()
			used.Sub(own[res])
			if used.Sign() < 0 {
				used = resource.Quantity{}
			}
			hard := q.Hard[name]
			left := hard.DeepCopy()
			left.Sub(used)
			if left.Cmp(need) < 0 {
				if left.Sign() < 0 {
					left = resource.Quantity{}
				}
				return fmt.Sprintf("ResourceQuota %s: the group needs %s of %s, %s is left of %s (%s used by other pods)",
					q.Name, need.String(), name, left.String(), hard.String(), used.String()), false
			}
		}
	}
	return "", true
}

// Labels Kueue puts on the pods of workloads it manages: plain pods and
// pod groups (managed), pods of admitted jobs (podset), and the queue a
// pod asks for.
const (
	KueueManagedLabel = "kueue.x-k8s.io/managed"
	KueuePodSetLabel  = "kueue.x-k8s.io/podset"
	KueueQueueLabel   = "kueue.x-k8s.io/queue-name"
)

// KueueManaged reports whether Kueue admits the pod's workload against its
// own quotas: then the job queue does not admit it a second time against
// ResourceQuotas (the apiserver still enforces those when pods are
// created); it only places the group whole.
func KueueManaged(pod *corev1.Pod) bool {
	if pod.Labels[KueueManagedLabel] == "true" {
		return true
	}
	_, podSet := pod.Labels[KueuePodSetLabel]
	_, queue := pod.Labels[KueueQueueLabel]
	return podSet || queue
}

// quotaResource maps a quota's resource name to the pod request it counts.
func quotaResource(name corev1.ResourceName) (corev1.ResourceName, bool) {
	switch {
	case name == corev1.ResourcePods || name == "count/pods":
		return corev1.ResourcePods, true
	case name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage:
		return name, true
	case strings.HasPrefix(string(name), "requests."):
		return corev1.ResourceName(strings.TrimPrefix(string(name), "requests.")), true
	}
	return "", false
}

// groupRequests returns what the group's existing members ask for (own)
// and what the whole group will (whole), both with a pod count.
func groupRequests(g Group) (own, whole corev1.ResourceList) {
	own = corev1.ResourceList{}
	largest := corev1.ResourceList{}
	members := 0
	for _, list := range [][]*corev1.Pod{g.Pending, g.Bound} {
		for _, p := range list {
			members++
			for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
				sum := own[name]
				sum.Add(q)
				own[name] = sum
				if l, ok := largest[name]; !ok || q.Cmp(l) > 0 {
					largest[name] = q
				}
			}
		}
	}
	own[corev1.ResourcePods] = *resource.NewQuantity(int64(members), resource.DecimalSI)
	whole = own.DeepCopy()
	if missing := g.MinAvailable - members; missing > 0 {
		for name, q := range largest {
			sum := whole[name]
			for range missing {
				sum.Add(q)
			}
			whole[name] = sum
		}
		whole[corev1.ResourcePods] = *resource.NewQuantity(int64(g.MinAvailable), resource.DecimalSI)
	}
	for name, q := range g.MinResources {
		if w, ok := whole[name]; !ok || q.Cmp(w) > 0 {
			whole[name] = q.DeepCopy()
		}
	}
	return own, whole
}
