package loadaware

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Filter keeps pods off a node whose load of a resource is above its
// threshold: what the fresh sample measured plus what pods bound since add.
// A node without a fresh sample passes: its load is not known.
func (pl *LoadAware) Filter(ctx context.Context, _ fwk.CycleState, _ *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s := pl.sample(ctx, ni.Node().Name, pl.clock.Now())
	if s == nil {
		return nil
	}
	l := nodeLoad(ni, s)
	for r := range numResources {
		if t := pl.thresholds[r]; t > 0 && l.known[r] && l.value[r] > t {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node %s load %.0f%% is above the threshold %.0f%%", resourceNames[r], 100*l.value[r], 100*t))
		}
	}
	return nil
}
