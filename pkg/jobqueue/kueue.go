package jobqueue

import corev1 "k8s.io/api/core/v1"

// Labels Kueue puts on the pods of workloads it manages: plain pods and
// pod groups (managed), pods of admitted jobs (podset), and the queue a
// pod asks for.
const (
	KueueManagedLabel = "kueue.x-k8s.io/managed"
	KueuePodSetLabel  = "kueue.x-k8s.io/podset"
	KueueQueueLabel   = "kueue.x-k8s.io/queue-name"
)

// KueueManaged reports whether Kueue admits the pod's workload against its
// own quotas: then the job queue does not admit it a second time against
// ResourceQuotas (the apiserver still enforces those when pods are
// created); it only places the group whole.
func KueueManaged(pod *corev1.Pod) bool {
	if pod.Labels[KueueManagedLabel] == "true" {
		return true
	}
	_, podSet := pod.Labels[KueuePodSetLabel]
	_, queue := pod.Labels[KueueQueueLabel]
	return podSet || queue
}
