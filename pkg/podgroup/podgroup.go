// Package podgroup reads which pod group a pod belongs to: the seed labels
// of seed 003 (pod-group.scheduling.sigs.k8s.io/name and min-available), or
// a scheduler-plugins PodGroup named by scheduling.x-k8s.io/pod-group.
package podgroup

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
)

// The seed labels: all pods of one group carry the same two values.
const (
	// NameLabel names the group, unique within the namespace.
	NameLabel = "pod-group.scheduling.sigs.k8s.io/name"
	// MinAvailableLabel is how many members must be placed together.
	MinAvailableLabel = "pod-group.scheduling.sigs.k8s.io/min-available"
)

// MaxMinAvailable bounds min-available: no cluster places a larger gang,
// and a typo (an extra zero) should fail loudly rather than wait forever.
const MaxMinAvailable = 10000

// Ref identifies a pod group and its gang size.
type Ref struct {
	Namespace string
	Name      string
	// MinAvailable members must be placed at once.
	MinAvailable int
	// Created is the PodGroup's creation time; zero for label groups,
	// whose time is their earliest member's.
	Created time.Time
	// Timeout is the PodGroup's scheduleTimeoutSeconds; zero: the default.
	Timeout time.Duration
	// MinResources is the PodGroup's minResources; nil for label groups.
	MinResources corev1.ResourceList
}

// Key is namespace/name, unique in the cluster.
func (r Ref) Key() string { return r.Namespace + "/" + r.Name }

// KeyOf returns the key (namespace/name) of the group the pod names, seed
// label first, without validating anything: for hot paths (queue order,
// matching members) that only compare groups. Groups.Of validates.
func KeyOf(pod *corev1.Pod) (string, bool) {
	if Native(pod) {
		return "", false
	}
	name, ok := pod.Labels[NameLabel]
	if !ok {
		if name, ok = pod.Labels[schedulingv1alpha1.PodGroupLabel]; !ok {
			return "", false
		}
	}
	return pod.Namespace + "/" + name, true
}

// Native reports whether the pod belongs to a group of Kubernetes' native
// Workload API (spec.schedulingGroup, GenericWorkload gate). Such pods are
// the upstream GangScheduling plugin's: aisched's Coscheduling and job
// queue leave them alone, whatever labels they carry, so that one pod is
// never ganged twice.
func Native(pod *corev1.Pod) bool { return pod.Spec.SchedulingGroup != nil }

// FromPod returns the group of a pod. ok is false for a pod that names no
// group. An error names the label and the value that is wrong.
func FromPod(pod *corev1.Pod) (ref Ref, ok bool, err error) {
	if Native(pod) {
		return Ref{}, false, nil
	}
	name, hasName := pod.Labels[NameLabel]
	minValue, hasMin := pod.Labels[MinAvailableLabel]
	if !hasName && !hasMin {
		return Ref{}, false, nil
	}
	if !hasName {
		return Ref{}, true, fmt.Errorf("label %s=%q needs label %s to name the group", MinAvailableLabel, minValue, NameLabel)
	}
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		return Ref{}, true, fmt.Errorf("label %s=%q: %s", NameLabel, name, msg)
	}
	ref = Ref{Namespace: pod.Namespace, Name: name, MinAvailable: 1}
	if !hasMin {
		return ref, true, nil
	}
	n, err := strconv.Atoi(minValue)
	switch {
	case err != nil:
		return Ref{}, true, fmt.Errorf("label %s=%q: not a whole number", MinAvailableLabel, minValue)
	case n < 1 || n > MaxMinAvailable:
		return Ref{}, true, fmt.Errorf("label %s=%q: must be between 1 and %d", MinAvailableLabel, minValue, MaxMinAvailable)
	}
	ref.MinAvailable = n
	return ref, true, nil
}
