package sim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/sim/engine"
	"github.com/aisched/aisched/pkg/sim/metrics"
	"github.com/aisched/aisched/pkg/sim/scenario"
)

// A scenario with team queues (scenario.Queue) runs under each policy's
// admission: the queues created as aischedqueues with each namespace
// labelled with its queue, or ResourceQuotas of the queues' guarantees in
// their namespaces; the teams' metrics (metrics.Teams) are measured the
// same way under both.

// namespaceOf is the namespace ns as created under admission: labelled
// with its queue under admission queues.
func namespaceOf(ns scenario.Namespace, admission string) *corev1.Namespace {
	out := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}
	if admission == scenario.AdmissionQueues && ns.Queue != "" {
		out.Labels = map[string]string{aischedv1alpha1.QueueLabel: ns.Queue}
	}
	return out
}

// prepareQueues creates the scenario's queues under admission queues, or
// under admission resourceQuota a ResourceQuota of its queue's guarantees
// in each namespace that names one.
func prepareQueues(ctx context.Context, c engine.Cluster, s *scenario.Scenario, admission string) error {
	switch admission {
	case scenario.AdmissionQueues:
		for i := range s.Queues {
			if _, err := c.Aisched().AischedV1alpha1().AischedQueues().Create(ctx, s.Queues[i].Object(), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("queue %s: %w", s.Queues[i].Name, err)
			}
		}
	case scenario.AdmissionResourceQuota:
		for _, ns := range s.Namespaces {
			if ns.Queue == "" {
				continue
			}
			q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "queue-" + ns.Queue, Namespace: ns.Name},
				Spec: corev1.ResourceQuotaSpec{Hard: s.GuaranteeQuota(ns.Queue)}}
			if _, err := c.Client().CoreV1().ResourceQuotas(ns.Name).Create(ctx, q, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("namespace %s: the quota of queue %s: %w", ns.Name, ns.Queue, err)
			}
		}
	}
	return nil
}

// newTeams follows the teams of a scenario with queues (nil without)
// over a run that started at start: the mean allocation is read from the
// first arrival to the last.
func newTeams(s *scenario.Scenario, start time.Time, arrivals []arrival) *metrics.Teams {
	if len(s.Queues) == 0 || len(arrivals) == 0 {
		return nil
	}
	nodes := map[string]int64{}
	for _, p := range s.Cluster.NodePools {
		if p.GPUs == nil {
			continue
		}
		for i := range p.Count {
			nodes[p.NodeName(i)] = int64(p.GPUs.Count) * gpu.WholeCardMilli
		}
	}
	return metrics.NewTeams(s.QueueSpecs(), nodes, start.Add(arrivals[0].at), start.Add(arrivals[len(arrivals)-1].at), partialAfter)
}

// jobOf is the key of a pod's job as the job queue keys it: its group's
// namespace/name, or "pod <namespace>/<name>" for a pod in no group, and
// the job's min-available.
func jobOf(pod *corev1.Pod) (string, int) {
	if key, ok := podgroup.KeyOf(pod); ok {
		min, _ := strconv.Atoi(pod.Labels[podgroup.MinAvailableLabel])
		return key, min
	}
	return "pod " + pod.Namespace + "/" + pod.Name, 1
}

// gpuMilli is what a pod asks of cards, in thousandths.
func gpuMilli(pod *corev1.Pod) int64 {
	r, err := gpu.ParseRequest(pod)
	if err != nil {
		return 0
	}
	return r.TotalMilli()
}

// arrive records that a pod of the workload was submitted: in its group,
// and in its team.
func (w *watcher) arrive(s *scenario.Scenario, pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	job, min := jobOf(pod)
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if g, ok := pod.Labels[podgroup.NameLabel]; ok {
		w.group[key] = pod.Namespace + "/" + g
		w.groups.Created(w.group[key], min, now)
	}
	if w.teams != nil {
		w.teams.Arrive(now, key, job, s.QueueOf(pod.Namespace), gpuMilli(pod), min)
	}
}

// observeTeams tells the teams what became of a pod: bound, taken back,
// ended. Called with w.mu held.
func (w *watcher) observeTeams(pod *corev1.Pod, now time.Time) {
	if w.teams == nil || pod.Spec.NodeName == "" {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	w.teams.Bind(now, key, pod.Spec.NodeName)
	if taker, ok := jobqueue.TakenBackFor(pod); ok {
		w.teams.Evict(now, key, taker)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		w.teams.End(now, key)
	}
}

// gone records a pod deleted: its group lost a bound member, and its team
// the cards it held; an evicted pod is replaced (w.evicted).
func (w *watcher) gone(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	now := w.now()
	w.mu.Lock()
	if _, bound := w.bound[key]; bound && !w.ended[key] {
		w.ended[key] = true
		w.last = now
		if g, ok := w.group[key]; ok {
			w.groups.Unbound(g, now)
		}
	}
	if w.teams != nil {
		w.observeTeams(pod, now)
		w.teams.End(now, key)
	}
	w.mu.Unlock()
	if evicted(pod) && w.evicted != nil {
		w.evicted(pod)
	}
}

// evicted reports whether a pod was deleted by preemption: it has the
// DisruptionTarget condition the scheduler and the job queue set.
func evicted(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// metricsInterval is how often the simulated nodes publish NodeMetrics:
// every second, unless the scenario reports nothing that reads them
// (balance_efficiency_h, and LoadAware's scores with it). A shared
// cluster's hours then cost no second-by-second samples.
func metricsInterval(s *scenario.Scenario) time.Duration {
	if len(s.Queues) > 0 && !slices.Contains(s.Metrics, "balance_efficiency_h") {
		return -1
	}
	return time.Second
}
