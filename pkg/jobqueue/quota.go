package jobqueue

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	"k8s.io/utils/clock"
)

// QuotaUsage is what pod counts against a ResourceQuota, by the quota's
// resource names (pods, count/pods, cpu and requests.cpu, limits.cpu,
// memory, requests.nvidia.com/gpu, ...), counted by upstream's pod
// evaluator, as the ResourceQuota controller counts it. The queue checks
// groups with it, and the simulator (aisched whatif) charges the quotas of
// the pods it creates with it, so the two count alike.
func QuotaUsage(pod *corev1.Pod) corev1.ResourceList {
	usage, err := core.PodUsageFunc(pod, clock.RealClock{})
	if err != nil {
		// PodUsageFunc fails only for objects that are not pods.
		return corev1.ResourceList{}
	}
	return usage
}

// checkQuota reports whether the whole group fits every ResourceQuota of
// its namespace: for each resource a quota limits, what other pods use
// plus what the whole group counts (QuotaUsage) must not exceed
// spec.hard. The group is its members; a group still missing members
// counts each missing one like its largest member per resource, and a
// PodGroup's minResources is a floor. Quotas on object counts other than
// pods are left to the apiserver.
func checkQuota(g Group, quotas []Quota) (string, bool) {
	if len(quotas) == 0 || slices.ContainsFunc(g.Pending, KueueManaged) || slices.ContainsFunc(g.Bound, KueueManaged) {
		return "", true
	}
	own, whole := groupUsage(g)
	for _, q := range quotas {
		names := make([]corev1.ResourceName, 0, len(q.Hard))
		for name := range q.Hard {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			need, ok := whole[name]
			if !ok || need.IsZero() {
				continue
			}
			used := q.Used[name].DeepCopy()
			used.Sub(own[name])
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

// groupUsage returns what the group's existing members count against a
// quota (own) and what the whole group will (whole).
func groupUsage(g Group) (own, whole corev1.ResourceList) {
	own = corev1.ResourceList{}
	largest := corev1.ResourceList{}
	members := 0
	for _, list := range [][]*corev1.Pod{g.Pending, g.Bound} {
		for _, p := range list {
			members++
			usage := QuotaUsage(p)
			own = quota.Add(own, usage)
			largest = quota.Max(largest, usage)
		}
	}
	whole = own.DeepCopy()
	if missing := g.MinAvailable - members; missing > 0 {
		for range missing {
			whole = quota.Add(whole, largest)
		}
	}
	if len(g.MinResources) > 0 {
		// minResources names pod requests (cpu, nvidia.com/gpu): counted
		// as a pod asking for them, without its pod count.
		floor := QuotaUsage(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Resources: corev1.ResourceRequirements{Requests: g.MinResources}}}}})
		delete(floor, corev1.ResourcePods)
		delete(floor, "count/pods")
		whole = quota.Max(whole, floor)
	}
	return own, whole
}
