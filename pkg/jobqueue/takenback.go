package jobqueue

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// takenBackFormat is the DisruptionTarget message of a pod the job queue
// takes back for a team queue: the taker's queue, its group and priority,
// and the queues the capacity was borrowed from.
const takenBackFormat = "taken back by aisched's job queue for %s, which is below its guarantee or its fair share (pod group %s of priority %d); %s had borrowed the capacity"

// TakenBackFor returns the key of the work a pod was taken back for (a pod
// group's namespace/name, or "pod <namespace>/<name>" for a pod in no
// group), read from its DisruptionTarget condition; ok is false when the
// job queue did not take it back for a team queue. The simulator counts
// the cards evicted per card taken back with it.
func TakenBackFor(pod *corev1.Pod) (key string, ok bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue || !strings.HasPrefix(c.Message, takenBackPrefix) {
			continue
		}
		_, rest, found := strings.Cut(c.Message, "(pod group ")
		i := strings.LastIndex(rest, " of priority ")
		if !found || i < 0 {
			return "", false
		}
		return rest[:i], true
	}
	return "", false
}

// takenBackPrefix starts takenBackFormat's messages.
const takenBackPrefix = "taken back by aisched's job queue for "
