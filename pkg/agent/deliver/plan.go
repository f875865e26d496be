package deliver

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/aisched/aisched/pkg/gpu"
)

// Share is the part of each of its cards a container of a shared pod
// gets.
type Share struct {
	// Milli is the card's compute in thousandths; 0 when the pod asked for
	// memory alone (no compute limit).
	Milli int64
	// MemMiB is the card's memory in MiB; 0 when the pod asked for compute
	// alone (no memory limit).
	MemMiB int64
}

// Delivery is what one container gets: the UUIDs of its cards, and for a
// shared pod the share of each. The zero Delivery is no GPU.
type Delivery struct {
	UUIDs []string
	// Share is nil for whole cards.
	Share *Share
}

// Empty reports whether the container gets no GPU.
func (d Delivery) Empty() bool { return len(d.UUIDs) == 0 }

// Error is a pod whose assignment cannot be delivered; it names the
// annotation at fault. The hook fails the container's creation with it, so
// the kubelet reports it on the pod and retries.
type Error struct {
	Pod    string
	Key    string
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("aisched GPU delivery: pod %s: %s: %s", e.Pod, e.Key, e.Reason)
}

// Plan returns what container (a name of pod's containers or init
// containers) gets of the cards the scheduler assigned to pod, on a node
// with cards. A pod without gpu.aisched.io/assigned gets the zero Delivery:
// another scheduler placed it and the node's device plugin serves it, or
// it gets its GPUs through DRA claims, which the DRA driver prepares. So
// does a container whose nvidia.com/gpu the scheduler backed with a DRA
// claim (the pod's status.extendedResourceClaimStatus maps it): the
// driver prepared its devices, and cards given here would fight them.
//
// How the pod's cards split among its containers follows the kubelet's
// device manager: each app container takes the next slice of the pod's
// cards, as many as its nvidia.com/gpu request; an init container takes the
// first cards of the pod (init containers run before the others and give
// their cards back). A shared pod's cards, a share of each, go to every
// container whose resources name a GPU (HAMi's form), or, when none does
// (aisched's and KAI's annotations), to every app container; a share of
// memory in percent is the MiB the scheduler recorded for the cards it
// chose.
func Plan(pod *corev1.Pod, container string, cards []gpu.Card) (Delivery, error) {
	a := pod.Annotations
	assigned, ok := a[gpu.AssignedAnnotation]
	if !ok || draServed(pod, container) {
		return Delivery{}, nil
	}
	name := pod.Namespace + "/" + pod.Name
	fail := func(key, format string, args ...any) (Delivery, error) {
		return Delivery{}, &Error{Pod: name, Key: key, Reason: fmt.Sprintf(format, args...)}
	}
	req, err := gpu.ParseRequest(pod)
	if err != nil {
		return fail("request", "%v", err)
	}
	indices, ok := gpu.ParseIndices(assigned)
	if !ok {
		return fail(gpu.AssignedAnnotation, "%q is not a list of card indices", assigned)
	}
	uuids, err := uuidsOf(a, indices, cards)
	if err != nil {
		return fail(gpu.AssignedUUIDsAnnotation, "%v", err)
	}
	if req.Shared() {
		if int64(len(uuids)) != req.Count {
			return fail(gpu.AssignedAnnotation, "%q names %d cards for a pod that shares %d", assigned, len(uuids), req.Count)
		}
		mib, ok := req.BoundMemMiB(a)
		if !ok {
			return fail(gpu.AssignedGPUMemAnnotation, "%q is not the MiB of each card that the share of %d%% of its memory holds", a[gpu.AssignedGPUMemAnnotation], req.GPUMemPercent)
		}
		if !sharesCard(pod, container) {
			return Delivery{}, nil
		}
		return Delivery{UUIDs: uuids, Share: &Share{Milli: req.Milli, MemMiB: mib}}, nil
	}
	if int64(len(uuids)) != req.Count {
		return fail(gpu.AssignedAnnotation, "%q names %d cards, the pod requests %d nvidia.com/gpu", assigned, len(uuids), req.Count)
	}
	from, to, found := slice(pod, container)
	if !found {
		return fail("container", "the pod has no container %q", container)
	}
	if to > len(uuids) {
		return fail(gpu.AssignedAnnotation, "%q names %d cards, fewer than the containers request", assigned, len(uuids))
	}
	if from == to {
		return Delivery{}, nil
	}
	return Delivery{UUIDs: slices.Clone(uuids[from:to])}, nil
}

// uuidsOf returns the UUIDs of the assigned cards: the scheduler's list
// when it wrote one, each of which must be a card of the node, or else the
// node's cards at the assigned indices.
func uuidsOf(a map[string]string, indices []int, cards []gpu.Card) ([]string, error) {
	byUUID := make(map[string]bool, len(cards))
	for _, c := range cards {
		byUUID[c.UUID] = true
	}
	if v, ok := a[gpu.AssignedUUIDsAnnotation]; ok {
		uuids := strings.Split(v, ",")
		if len(uuids) != len(indices) {
			return nil, fmt.Errorf("%q names %d cards, %s names %d", v, len(uuids), gpu.AssignedAnnotation, len(indices))
		}
		for i, u := range uuids {
			uuids[i] = strings.TrimSpace(u)
			if !byUUID[uuids[i]] {
				return nil, fmt.Errorf("card %q is not a card of this node (it has %d)", uuids[i], len(cards))
			}
		}
		return uuids, nil
	}
	uuids := make([]string, len(indices))
	for i, idx := range indices {
		c := gpu.CardByIndex(cards, idx)
		if c == nil || c.UUID == "" {
			return nil, fmt.Errorf("absent, and this node has no card %d with a UUID to deliver (it has %d)", idx, len(cards))
		}
		uuids[i] = c.UUID
	}
	return uuids, nil
}

// slice returns the range of the pod's cards that container gets.
func slice(pod *corev1.Pod, container string) (from, to int, found bool) {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == container {
			return 0, int(cardsOf(c)), true
		}
	}
	for _, c := range pod.Spec.Containers {
		n := int(cardsOf(c))
		if c.Name == container {
			return from, from + n, true
		}
		from += n
	}
	return 0, 0, false
}

// cardsOf is a container's nvidia.com/gpu request (its limit when it sets
// no request, as for every extended resource).
func cardsOf(c corev1.Container) int64 {
	if q, ok := c.Resources.Requests[gpu.ResourceName]; ok {
		return q.Value()
	}
	q := c.Resources.Limits[gpu.ResourceName]
	return q.Value()
}

// gpuResources are the resources by which a container of a shared pod
// claims the pod's card in HAMi's form.
var gpuResources = []corev1.ResourceName{gpu.ResourceName, gpu.HAMiGPUMemResource, gpu.HAMiGPUCoresResource}

// sharesCard reports whether container gets its shared pod's card.
func sharesCard(pod *corev1.Pod, container string) bool {
	names := func(c corev1.Container) bool {
		for _, r := range gpuResources {
			if _, ok := c.Resources.Limits[r]; ok {
				return true
			}
			if _, ok := c.Resources.Requests[r]; ok {
				return true
			}
		}
		return false
	}
	all := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	if !slices.ContainsFunc(all, names) {
		return slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == container })
	}
	return slices.ContainsFunc(all, func(c corev1.Container) bool { return c.Name == container && names(c) })
}

// draServed reports whether the DRA driver serves the container's
// nvidia.com/gpu: the scheduler backed the extended resource with a claim
// (KEP-5004), as it does on a node whose DRA driver's device class names
// nvidia.com/gpu and that has no device plugin for it.
func draServed(pod *corev1.Pod, container string) bool {
	st := pod.Status.ExtendedResourceClaimStatus
	return st != nil && slices.ContainsFunc(st.RequestMappings, func(m corev1.ContainerExtendedResourceRequest) bool {
		return m.ContainerName == container && m.ResourceName == string(gpu.ResourceName)
	})
}
