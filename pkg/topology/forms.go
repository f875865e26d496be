package topology

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// form is one way of asking for a place in a topology: aisched's keys or
// a peer's, read from a pod's annotations or a PodGroup's. read returns ok
// false when the annotations carry none of the form's keys.
type form struct {
	name string
	read func(annotations map[string]string, where string) (Constraint, bool, error)
}

// podForms are the forms a pod may carry (on itself, for example from a
// Job's pod template), in the order they are read.
var podForms = []form{
	{"aisched", ofAisched},
	{"Kueue", ofKueue},
	{"KAI-Scheduler", ofKAI},
	{"Koordinator", ofKoordinator},
}

// groupForms are the forms a PodGroup's annotations may carry.
var groupForms = []form{
	{"aisched", ofAisched},
	{"KAI-Scheduler", ofKAI},
	{"Koordinator", ofKoordinator},
}

// OfPod returns what a pod asks of a topology, in whichever form it
// carries; ok is false when it asks nothing. An error names the key whose
// value cannot be read, or the two forms a pod must not mix.
func OfPod(pod *corev1.Pod) (Constraint, bool, error) {
	return read(podForms, pod.Annotations, "annotation")
}

// OfPodGroup returns what a PodGroup asks: its annotations, or a Volcano
// PodGroup's spec.networkTopology and subGroupPolicy (volcano: its spec,
// nil for another PodGroup).
func OfPodGroup(annotations map[string]string, volcano map[string]interface{}) (Constraint, bool, error) {
	c, ok, err := read(groupForms, annotations, "PodGroup annotation")
	if volcano == nil || err != nil {
		return c, ok, err
	}
	v, vok, verr := ofVolcano(volcano)
	switch {
	case verr != nil:
		return Constraint{}, true, verr
	case ok && vok:
		return Constraint{}, true, fmt.Errorf("%s and spec.networkTopology both ask for a topology domain; keep one", keyOf(c))
	case vok:
		return v, true, nil
	}
	return c, ok, nil
}

func read(forms []form, annotations map[string]string, where string) (Constraint, bool, error) {
	if len(annotations) == 0 {
		return Constraint{}, false, nil
	}
	var found Constraint
	var first string
	for _, f := range forms {
		c, ok, err := f.read(annotations, where)
		switch {
		case err != nil:
			return Constraint{}, true, err
		case !ok:
			continue
		case first != "":
			return Constraint{}, true, fmt.Errorf("%s and %s both ask for a topology domain; keep one", keyOf(found), keyOf(c))
		}
		found, first = c, f.name
	}
	return found, first != "", nil
}

// Source names the key c was read from first, for messages ("annotation
// kueue.x-k8s.io/podset-required-topology").
func (c Constraint) Source() string { return keyOf(c) }

// keyOf names the first key a constraint was read from.
func keyOf(c Constraint) string {
	for _, k := range []struct{ key, v string }{{c.RequiredKey, c.Required}, {c.PreferredKey, c.Preferred}, {c.SliceKey, c.SliceLevel}, {c.TopologyKey, c.Topology}} {
		if k.v != "" {
			return k.key
		}
	}
	return strings.TrimSpace(c.RequiredKey)
}
