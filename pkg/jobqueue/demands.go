package jobqueue

import corev1 "k8s.io/api/core/v1"

// demandCache remembers the demand of each pod object (DemandOf) from one
// pass to the next. A pass looks at every pod of the cluster, and reading
// their requests each time (PodRequests sums every container's into new
// maps) was most of a pass on a cluster of gangs: the cost of a pass grew
// with the pods, and passes come as often as every minInterval. An
// informer's pods are immutable (an update is a new object), so an
// object's demand never changes; the cache keeps the objects the last
// pass looked at. Only the loop uses it.
type demandCache struct {
	last, cur map[*corev1.Pod]Demand
}

// of returns the pod's demand.
func (c *demandCache) of(pod *corev1.Pod) Demand {
	if d, ok := c.cur[pod]; ok {
		return d
	}
	d, ok := c.last[pod]
	if !ok {
		d = DemandOf(pod)
	}
	if c.cur == nil {
		c.cur = map[*corev1.Pod]Demand{}
	}
	c.cur[pod] = d
	return d
}

// next starts a pass: the objects the last pass did not look at again are
// forgotten.
func (c *demandCache) next() {
	c.last, c.cur = c.cur, make(map[*corev1.Pod]Demand, len(c.cur))
}
