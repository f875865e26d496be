package deliver

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/aisched/aisched/pkg/gpu"
)

// Drift is a pod whose containers hold other cards than the scheduler
// assigned, or none while it runs.
type Drift struct {
	Pod *corev1.Pod
	// Assigned and Held are UUIDs, sorted.
	Assigned, Held []string
}

// Located is a running GPU pod that no aisched profile placed, with the
// indices of the cards its containers hold.
type Located struct {
	Pod     *corev1.Pod
	Indices []int
}

// Compare compares what the node's containers hold with what the
// scheduler assigned to their pods. What a pod's containers hold comes
// from the hook's holdings (by container ID) when the hook saw
// them, and otherwise from the kubelet's PodResources API (podResources,
// the devices of nvidia.com/gpu; nil when it cannot be read), which says
// which cards the node's device plugin gave. pods are the node's pods;
// cards its GPUs.
func Compare(pods []*corev1.Pod, holdings map[string]Holding, podResources []*podresourcesv1.PodResources, cards []gpu.Card) (drift []Drift, located []Located) {
	byUID := map[string][]string{}
	for _, h := range holdings {
		if h.PodUID != "" {
			byUID[h.PodUID] = append(byUID[h.PodUID], h.UUIDs...)
		}
	}
	byName := map[string][]string{}
	for _, pr := range podResources {
		for _, c := range pr.GetContainers() {
			for _, d := range c.GetDevices() {
				if d.GetResourceName() == string(gpu.ResourceName) {
					key := pr.GetNamespace() + "/" + pr.GetName()
					byName[key] = append(byName[key], d.GetDeviceIds()...)
				}
			}
		}
	}
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil {
			continue
		}
		held, seen := byUID[string(pod.UID)]
		if !seen {
			held, seen = byName[pod.Namespace+"/"+pod.Name]
		}
		held = sortedSet(held)
		if _, ok := pod.Annotations[gpu.AssignedAnnotation]; !ok {
			if idx := indicesOf(held, cards); len(idx) > 0 && int64(len(idx)) == gpu.RequestedCards(pod) {
				located = append(located, Located{Pod: pod, Indices: idx})
			}
			continue
		}
		assigned, ok := assignedUUIDs(pod, cards)
		if !ok {
			// The hook reports a pod whose assignment cannot be delivered.
			continue
		}
		if !seen && pod.Status.Phase != corev1.PodRunning {
			// Not started: nothing holds cards yet.
			continue
		}
		if !slices.Equal(assigned, held) {
			drift = append(drift, Drift{Pod: pod, Assigned: assigned, Held: held})
		}
	}
	return drift, located
}

// assignedUUIDs are the UUIDs of every card the pod's containers get.
func assignedUUIDs(pod *corev1.Pod, cards []gpu.Card) ([]string, bool) {
	var all []string
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		d, err := Plan(pod, c.Name, cards)
		if err != nil {
			return nil, false
		}
		all = append(all, d.UUIDs...)
	}
	return sortedSet(all), true
}

// indicesOf maps UUIDs to the indices of the node's cards, sorted; nil
// when one is not a card of the node.
func indicesOf(uuids []string, cards []gpu.Card) []int {
	var idx []int
	for _, u := range uuids {
		i := slices.IndexFunc(cards, func(c gpu.Card) bool { return c.UUID == u })
		if i < 0 {
			return nil
		}
		idx = append(idx, cards[i].Index)
	}
	slices.Sort(idx)
	return idx
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
