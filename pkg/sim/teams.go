package sim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/sim/metrics"
	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/simcluster"
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
func prepareQueues(ctx context.Context, c simcluster.Cluster, s *scenario.Scenario, admission string) error {
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

// arriveInTeam tells the teams that a pod of the workload was submitted
// at at. Called with r.mu held.
func (r *record) arriveInTeam(pod *corev1.Pod, at time.Time) {
	if r.teams == nil {
		return
	}
	job, min := jobOf(pod)
	r.teams.Arrive(at, pod.Namespace+"/"+pod.Name, job, r.scenario.QueueOf(pod.Namespace), gpuMilli(pod), min)
}

// observeTeams tells the teams what became of a pod: bound, taken back,
// ended, deleted. Called with r.mu held.
func (r *record) observeTeams(ev simcluster.PodEvent) {
	pod := ev.Pod
	if r.teams == nil {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	if pod.Spec.NodeName != "" {
		r.teams.Bind(ev.At, key, pod.Spec.NodeName)
		if taker, ok := jobqueue.TakenBackFor(pod); ok {
			r.teams.Evict(ev.At, key, taker)
		}
	}
	if ev.Deleted || pod.Spec.NodeName != "" && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
		r.teams.End(ev.At, key)
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
