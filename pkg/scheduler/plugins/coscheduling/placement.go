package coscheduling

import (
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/jobqueue"
)

// placeable returns how many of pods, up to want, fit together on the
// free resources and cards of nodes (jobqueue.Fit: best fit, largest
// first; cards and shares placed as GPUFit places them). The nodes are
// the snapshot's: each node's cards are remembered while it is unchanged,
// so that a group's check reads again only the nodes that changed.
func (pl *Coscheduling) placeable(pods []*corev1.Pod, nodes []fwk.NodeInfo, want int) int {
	demands := make([]jobqueue.Demand, len(pods))
	for i, p := range pods {
		demands[i] = jobqueue.DemandOf(p)
	}
	rooms := make([]jobqueue.Room, 0, len(nodes))
	for _, ni := range nodes {
		if ni.Node() == nil {
			continue
		}
		rooms = append(rooms, jobqueue.Room{Node: ni.Node(), Free: freeOf(ni), GPUs: pl.nodeGPUs.Get(ni, struct{}{}, func() gpuledger.NodeGPUs { return pl.gpus.NodeGPUsOf(ni) })})
	}
	fit, _ := jobqueue.Fit(demands, rooms, want)
	return fit
}

// freeOf is what a node has left besides cards.
func freeOf(ni fwk.NodeInfo) jobqueue.Resources {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	return jobqueue.Resources{
		MilliCPU: alloc.GetMilliCPU() - used.GetMilliCPU(),
		Memory:   alloc.GetMemory() - used.GetMemory(),
		Pods:     int64(alloc.GetAllowedPodNumber() - len(ni.GetPods())),
	}
}
