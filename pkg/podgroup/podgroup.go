// Package podgroup reads which pod group a pod belongs to, in every form
// aisched reads (docs/peer-forms.md): groups the pods name and size
// themselves (the pod-group labels, Koordinator's annotations, Kueue's pod
// groups), and PodGroup objects a pod names (scheduler-plugins', by its
// label or the label it had before v0.24).
package podgroup

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/util/quote"
)

// The pod-group labels: all pods of one group carry the same two values.
const (
	// NameLabel names the group, unique within the namespace.
	NameLabel = "pod-group.scheduling.sigs.k8s.io/name"
	// MinAvailableLabel is how many members must be placed together.
	MinAvailableLabel = "pod-group.scheduling.sigs.k8s.io/min-available"
)

// Peers' forms in which each pod names and sizes its group.
const (
	// Koordinator's gang annotations: the name, how many members must be
	// placed together, how long placed members wait for the rest, and its
	// mode (aisched's gangs are Koordinator's Strict mode).
	KoordinatorNameAnnotation         = "gang.scheduling.koordinator.sh/name"
	KoordinatorMinAvailableAnnotation = "gang.scheduling.koordinator.sh/min-available"
	KoordinatorWaitingTimeAnnotation  = "gang.scheduling.koordinator.sh/waiting-time"
	KoordinatorModeAnnotation         = "gang.scheduling.koordinator.sh/mode"
	KoordinatorGroupsAnnotation       = "gang.scheduling.koordinator.sh/groups"
	// Kueue's plain-pod groups: the group's name (a label) and its number
	// of pods (an annotation), all of which Kueue admits together.
	KueueGroupNameLabel       = "kueue.x-k8s.io/pod-group-name"
	KueueTotalCountAnnotation = "kueue.x-k8s.io/pod-group-total-count"
	// VolcanoGroupAnnotation names a Volcano PodGroup (scheduling.volcano.sh).
	VolcanoGroupAnnotation = "scheduling.k8s.io/group-name"
)

// MaxTimeout bounds a group's wait for its members: int32 seconds, as
// scheduler-plugins' scheduleTimeoutSeconds.
const MaxTimeout = math.MaxInt32 * time.Second

// podForm is a form in which each pod names its group and its size.
type podForm struct {
	// nameKey and minKey are the keys of the name and the size; each a
	// label unless in annotations.
	nameKey, minKey             string
	nameInAnnotations, minInAnn bool
	// minRequired: the size must be given (else a group of one).
	minRequired bool
}

var podForms = [...]podForm{
	{nameKey: NameLabel, minKey: MinAvailableLabel},
	{nameKey: KoordinatorNameAnnotation, minKey: KoordinatorMinAvailableAnnotation, nameInAnnotations: true, minInAnn: true},
	{nameKey: KueueGroupNameLabel, minKey: KueueTotalCountAnnotation, minInAnn: true, minRequired: true},
}

// kind is "label" or "annotation", for messages.
func kind(inAnnotations bool) string {
	if inAnnotations {
		return "annotation"
	}
	return "label"
}

func (f *podForm) name(pod *corev1.Pod) (string, bool) {
	if f.nameInAnnotations {
		v, ok := pod.Annotations[f.nameKey]
		return v, ok
	}
	v, ok := pod.Labels[f.nameKey]
	return v, ok
}

func (f *podForm) min(pod *corev1.Pod) (string, bool) {
	if f.minInAnn {
		v, ok := pod.Annotations[f.minKey]
		return v, ok
	}
	v, ok := pod.Labels[f.minKey]
	return v, ok
}

// objectName returns the name of the PodGroup object the pod names, and
// the key that names it: scheduler-plugins' label, its old label, or
// Volcano's annotation.
func objectName(pod *corev1.Pod) (name, key string, ok bool) {
	if name, ok := pod.Labels[schedulingv1alpha1.PodGroupLabel]; ok {
		return name, "label " + schedulingv1alpha1.PodGroupLabel, true
	}
	if name, ok := pod.Labels[schedulingv1alpha1.OldPodGroupLabel]; ok {
		return name, "label " + schedulingv1alpha1.OldPodGroupLabel, true
	}
	if name, ok := pod.Annotations[VolcanoGroupAnnotation]; ok {
		return name, "annotation " + VolcanoGroupAnnotation, true
	}
	return "", "", false
}

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
	// Annotations are the PodGroup object's (scheduler-plugins' or
	// Volcano's); nil for groups the pods declare. They must not be
	// changed.
	Annotations map[string]string
	// Volcano is a Volcano PodGroup's spec (its networkTopology and
	// subGroupPolicy ask for a topology domain); nil otherwise. It must
	// not be changed.
	Volcano map[string]interface{}
}

// Key is namespace/name, unique in the cluster.
func (r Ref) Key() string { return r.Namespace + "/" + r.Name }

// KeyOf returns the key (namespace/name) of the group the pod names, in
// the order FromPod and Groups.Of read the forms, without validating
// anything: for hot paths (queue order, matching members) that only
// compare groups. Groups.Of validates.
func KeyOf(pod *corev1.Pod) (string, bool) {
	if Native(pod) {
		return "", false
	}
	for i := range podForms {
		if name, ok := podForms[i].name(pod); ok {
			return pod.Namespace + "/" + name, true
		}
	}
	if name, _, ok := objectName(pod); ok {
		return pod.Namespace + "/" + name, true
	}
	return "", false
}

// Native reports whether the pod belongs to a group of Kubernetes' native
// Workload API (spec.schedulingGroup, GenericWorkload gate). Such pods are
// the upstream GangScheduling plugin's: aisched's Coscheduling and job
// queue leave them alone, whatever labels they carry, so that one pod is
// never ganged twice.
func Native(pod *corev1.Pod) bool { return pod.Spec.SchedulingGroup != nil }

// FromPod returns the group of a pod that names and sizes its group
// itself. ok is false for a pod that names no group that way. An error
// names the label or annotation and the value that is wrong, including a
// pod that names its group in two forms.
func FromPod(pod *corev1.Pod) (ref Ref, ok bool, err error) {
	if Native(pod) {
		return Ref{}, false, nil
	}
	var form *podForm
	for i := range podForms {
		f := &podForms[i]
		_, hasName := f.name(pod)
		minValue, hasMin := f.min(pod)
		switch {
		case !hasName && !hasMin:
			continue
		case !hasName:
			return Ref{}, true, fmt.Errorf("%s %s=%s needs %s %s to name the group", kind(f.minInAnn), f.minKey, quote.Value(minValue), kind(f.nameInAnnotations), f.nameKey)
		case form != nil:
			return Ref{}, true, fmt.Errorf("%s %s and %s %s both name a group; keep one", kind(form.nameInAnnotations), form.nameKey, kind(f.nameInAnnotations), f.nameKey)
		}
		form = f
	}
	if form == nil {
		return Ref{}, false, nil
	}
	if _, key, ok := objectName(pod); ok {
		return Ref{}, true, fmt.Errorf("%s %s and %s both name a group; keep one", kind(form.nameInAnnotations), form.nameKey, key)
	}
	name, _ := form.name(pod)
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		return Ref{}, true, fmt.Errorf("%s %s=%s: %s", kind(form.nameInAnnotations), form.nameKey, quote.Value(name), msg)
	}
	ref = Ref{Namespace: pod.Namespace, Name: name, MinAvailable: 1}
	minValue, hasMin := form.min(pod)
	switch {
	case !hasMin && form.minRequired:
		return Ref{}, true, fmt.Errorf("%s %s=%s needs %s %s, the group's number of pods", kind(form.nameInAnnotations), form.nameKey, quote.Value(name), kind(form.minInAnn), form.minKey)
	case hasMin:
		n, err := strconv.Atoi(strings.TrimSpace(minValue))
		switch {
		case err != nil:
			return Ref{}, true, fmt.Errorf("%s %s=%s: not a whole number", kind(form.minInAnn), form.minKey, quote.Value(minValue))
		case n < 1 || n > MaxMinAvailable:
			return Ref{}, true, fmt.Errorf("%s %s=%s: must be between 1 and %d", kind(form.minInAnn), form.minKey, quote.Value(minValue), MaxMinAvailable)
		}
		ref.MinAvailable = n
	}
	if form.nameKey == KoordinatorNameAnnotation {
		if err := readKoordinator(pod, &ref); err != nil {
			return Ref{}, true, err
		}
	}
	return ref, true, nil
}

// readKoordinator reads Koordinator's gang annotations beyond the name and
// the size, refusing those whose meaning aisched cannot keep.
func readKoordinator(pod *corev1.Pod, ref *Ref) error {
	a := pod.Annotations
	if v, ok := a[KoordinatorWaitingTimeAnnotation]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < time.Second || d > MaxTimeout {
			return fmt.Errorf("annotation %s=%s: want a duration from 1s to %s, such as 600s", KoordinatorWaitingTimeAnnotation, quote.Value(v), MaxTimeout)
		}
		ref.Timeout = d
	}
	if v, ok := a[KoordinatorModeAnnotation]; ok && v != "Strict" {
		return fmt.Errorf("annotation %s=%s: not supported: aisched's gangs are Strict (members placed together or not at all); set Strict or remove it", KoordinatorModeAnnotation, quote.Value(v))
	}
	if v, ok := a[KoordinatorGroupsAnnotation]; ok {
		return fmt.Errorf("annotation %s=%s: not supported: aisched gangs one group at a time; put the pods in one group", KoordinatorGroupsAnnotation, quote.Value(v))
	}
	return nil
}
