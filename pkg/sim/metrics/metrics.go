// Package metrics computes the placement-quality metrics that
// `aisched sim run` reports for each policy: pending pods, the mean node
// variance, the balance efficiency H of measured load, GPU
// allocation and the unallocated GPU percentage of the FGD evaluation
// protocol (docs/scenarios.md, "Trace replay"), gangs that
// were partially bound and how long gangs waited, GPU pods bound to cards
// that are too small, throughput, and how a cluster shared by teams
// served each team (Teams).
//
// The package is pure arithmetic over plain Go values: the runner observes
// the cluster and passes nodes, cards and group events in; nothing here
// talks to Kubernetes, so that every number can be checked by hand. The
// node metrics stay finite for any node, zero capacities and bad load
// samples included, because encoding/json refuses NaN and infinities and
// one bad node must not lose a whole report.
package metrics

import (
	"slices"
	"time"

	"github.com/aisched/aisched/pkg/util/percentile"
)

// Result is the metrics of one policy in one scenario. Its JSON keys are
// fixed: reports and the tools that compare runs read them, so renaming one
// is a breaking change. Metrics that a scenario may not define (no GPUs, no
// node performance, no gangs) are pointers left out of the JSON, so that
// "not measured" never reads as 0.
type Result struct {
	// PendingPods is the number of pods left unbound.
	PendingPods int `json:"pending_pods"`
	// MeanNodeVariance is MeanNodeVariance of the final placement.
	MeanNodeVariance float64 `json:"mean_node_variance"`
	// BalanceEfficiencyH is BalanceEfficiencyH of the final placement; nil
	// when no node has a known performance.
	BalanceEfficiencyH *float64 `json:"balance_efficiency_h,omitempty"`
	// GPUAllocationRate is GPUAllocationRate of the final placement, in
	// [0, 1]; nil when the cluster has no GPUs.
	GPUAllocationRate *float64 `json:"gpu_allocation_rate,omitempty"`
	// UnallocatedGPUPct is UnallocatedGPUPct of the final placement for a
	// scenario; for a trace replay, read when the arrived GPU request
	// equals 100% of the cluster's GPU capacity (the FGD headline number).
	// Nil when the cluster has no GPUs.
	UnallocatedGPUPct *float64 `json:"unallocated_gpu_pct,omitempty"`
	// UnallocatedGPUPctCurve is the same metric read at other arrived
	// percentages (80 to 130 in the FGD protocol), in increasing order.
	UnallocatedGPUPctCurve []CurvePoint `json:"unallocated_gpu_pct_curve,omitempty"`
	// InexpressiblePods is the number of pods of a trace replay that the
	// simulated cluster cannot express (a GPU request aisched cannot place
	// yet); they count as arrived and never allocated. Nil for scenarios.
	InexpressiblePods *int `json:"inexpressible_pods,omitempty"`
	// PartialGroups is GroupTracker.Partial.
	PartialGroups int `json:"partial_groups"`
	// GroupWaitSeconds is PercentilesOf(GroupTracker.Waits()); nil when no
	// group reached its min-available.
	GroupWaitSeconds *Percentiles `json:"group_wait_seconds,omitempty"`
	// MisplacedGPUPods is the number of bound GPU pods for which Misplaced
	// is true.
	MisplacedGPUPods int `json:"misplaced_gpu_pods"`
	// PodsPerSecond is PodsPerSecond of the run.
	PodsPerSecond float64 `json:"pods_per_second"`
	// MakespanSeconds is the time from the first arrival to the last
	// pod's binding or end: on the same workload, a shorter one used the
	// cards more. Nil unless the scenario asks for it.
	MakespanSeconds *float64 `json:"makespan_seconds,omitempty"`
	// GPUBusyPct is 100 x the GPU-seconds the pods ran over the cards
	// times the makespan: how busy the cards were over the run. Nil unless
	// the scenario asks for it.
	GPUBusyPct *float64 `json:"gpu_busy_pct,omitempty"`
	// GPUWorkPct is GPUBusyPct of the work done: a gang that a scenario's
	// topologySlowdown ran longer, spread over domains, counts its run
	// over the slowdown. Equal to GPUBusyPct without a slowdown.
	GPUWorkPct *float64 `json:"gpu_work_pct,omitempty"`
	// The Topology metrics of the gangs that asked for topology domains
	// (TopologyResult); nil when none asked for what one measures.
	TopologyRequiredShare  *float64 `json:"topology_required_share,omitempty"`
	TopologyPreferredShare *float64 `json:"topology_preferred_share,omitempty"`
	TopologyDomainsSpanned *float64 `json:"topology_domains_spanned,omitempty"`
	TopologySlicesWhole    *float64 `json:"topology_slices_whole,omitempty"`

	// The metrics of a shared cluster's teams (Teams.Fill); nil for a
	// scenario without queues.
	//
	// MeanGPUAllocationRate is the cards held over the time from the
	// first arrival to the last, over all the cards in that time.
	MeanGPUAllocationRate *float64 `json:"mean_gpu_allocation_rate,omitempty"`
	// FairShareDeviationGPUs is how far teams' cards were from their fair
	// shares, in cards.
	FairShareDeviationGPUs *Deviation `json:"fair_share_deviation_gpus,omitempty"`
	// GuaranteeWaitSeconds is how long jobs within their teams'
	// guarantees waited to start.
	GuaranteeWaitSeconds *Tail `json:"guarantee_wait_seconds,omitempty"`
	// EvictedPerReclaimedGPU is the cards evicted to take capacity back,
	// over the cards the jobs that took it back asked for.
	EvictedPerReclaimedGPU *float64 `json:"evicted_per_reclaimed_gpu,omitempty"`
	// IdleGPUHoursWhileFitWaits is the card-hours left idle while a job
	// that they would hold waited.
	IdleGPUHoursWhileFitWaits *float64 `json:"idle_gpu_hours_while_fit_waits,omitempty"`
	// JobsNeverStarted counts the jobs that did not start by the end.
	JobsNeverStarted *int `json:"jobs_never_started,omitempty"`
}

// CurvePoint is the unallocated GPU percentage read when the GPU request of
// the pods that arrived so far reached ArrivedPct percent of the cluster's
// GPU capacity.
type CurvePoint struct {
	// ArrivedPct is the arrived GPU request in percent of capacity.
	ArrivedPct int `json:"arrived_pct"`
	// UnallocatedGPUPct is UnallocatedGPUPct at that point.
	UnallocatedGPUPct float64 `json:"unallocated_gpu_pct"`
}

// Percentiles summarises a distribution by its median and its 95th
// percentile.
type Percentiles struct {
	// P50 is the 50th percentile (the median).
	P50 float64 `json:"p50"`
	// P95 is the 95th percentile.
	P95 float64 `json:"p95"`
}

// PercentilesOf returns the 50th and 95th percentiles of values by the
// nearest-rank method: the p-th percentile is the value of rank
// ceil(p/100 * n) in increasing order, the smallest value with at least p%
// of the values at or below it. Nearest rank always reports a value that was
// observed (a wait some group really had), where linear interpolation would
// invent one between two groups; with the handful of gangs a scenario has,
// the difference shows. PercentilesOf is nil when values is empty; it does
// not modify values.
func PercentilesOf(values []float64) *Percentiles {
	if len(values) == 0 {
		return nil
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	return &Percentiles{P50: percentile.NearestRank(sorted, 500), P95: percentile.NearestRank(sorted, 950)}
}

// PodsPerSecond is the scheduling throughput of a run: pods bound in
// elapsed. It is 0 when elapsed is not positive, where the division would
// give an infinity that encoding/json refuses.
func PodsPerSecond(pods int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(pods) / elapsed.Seconds()
}
