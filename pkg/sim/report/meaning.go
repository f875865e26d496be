package report

import (
	"fmt"
	"io"
)

// Metric is what a reported metric counts and which way it improves, so
// that a table reads itself: a reader who sees aisched leave more pods
// pending needs to know whether that is worse, and why it may not be.
type Metric struct {
	// Better is +1 when higher is better, -1 when lower is, 0 when
	// neither (a rate of work).
	Better int `json:"better"`
	// Meaning says what is counted, and how to read it where the number
	// alone misleads.
	Meaning string `json:"meaning"`
}

// Metrics are the metrics a report may carry, by JSON key
// (metrics.Result); the comparison of the experiment matrix reads their
// direction.
var Metrics = map[string]Metric{
	"pending_pods": {-1, "pods not bound at the end (and pods the apiserver refused). " +
		"A gang that cannot fit whole stays whole pending by design: more pending pods with no partial_groups is a gang kept from holding cards it cannot use"},
	"mean_node_variance":        {-1, "per node, the variance of its CPU, memory and (GPU nodes) GPU use in percent; the mean over nodes"},
	"balance_efficiency_h":      {+1, "H = 1 - stddev(R)/mean(R), R = a node's measured load per unit of its performance; 1 is perfect balance"},
	"gpu_allocation_rate":       {+1, "GPUs allocated / all GPUs, at the end. Cards held by a gang that cannot start count as allocated: read it with partial_groups"},
	"unallocated_gpu_pct":       {-1, "100 - 100 x allocated GPU thousandths / capacity (FGD's fragmentation metric); for a trace, read at 100% of capacity arrived"},
	"unallocated_gpu_pct_curve": {-1, "unallocated_gpu_pct read as 80% to 130% of capacity has arrived (trace replays)"},
	"inexpressible_pods":        {-1, "trace pods the policy cannot express (a share of a card under a profile without GPUFit); they count as arrived and never allocated"},
	"partial_groups":            {-1, "gangs that had some but fewer than min-available members bound for 1 s or longer: cards and CPUs held by a job that cannot run"},
	"group_wait_seconds":        {-1, "p50 and p95 of a gang's wait, from its first member created to its min-available-th bound"},
	"misplaced_gpu_pods":        {-1, "GPU pods bound to cards with less memory or fewer cores than they asked"},
	"pods_per_second":           {0, "pods bound per second of the run: the simulator's pace, not a quality of the placement"},
	"gpu_busy_pct":              {+1, "100 x the GPU-seconds the pods ran / (the cluster's cards x makespan_seconds): how busy the cards were over the run"},
	"gpu_work_pct": {+1, "gpu_busy_pct of the work done: a gang spread over domains, which the scenario's topologySlowdown ran longer, counts its run over the slowdown; " +
		"equal to gpu_busy_pct without a slowdown"},
	"makespan_seconds": {-1, "from the first arrival to the last pod's binding or end: on the same workload, a shorter one used the cards more"},
	"topology_required_share": {+1, "gangs with a required topology level whose members are all inside one domain of it, as a share (1: every constraint held); " +
		"a policy that ignores topology is judged by what the gangs asked"},
	"topology_preferred_share": {+1, "gangs with a preferred topology level whose members are all inside one domain of it, as a share"},
	"topology_domains_spanned": {-1, "the mean number of domains of its preferred level (else its required one) a gang's members span; 1 is every gang inside one domain"},
	"topology_slices_whole":    {+1, "gangs in slices whose every domain of the slice level holds whole slices, as a share"},
	// A cluster shared by teams (scenarios with queues; metrics.Teams).
	"mean_gpu_allocation_rate": {+1, "cards held by bound pods over all cards, averaged over the time from the first arrival to the last: how much of the cluster the teams' work used while it arrived"},
	"fair_share_deviation_gpus": {-1, "per team (a leaf queue), |cards held - fair share| in cards, the fair share being the queues' division of the moment's use and waiting demand (guarantees first, the rest by weight; docs/queues.md); " +
		"mean: the worst team's mean over the run, max: the largest over teams and states that lasted. Jobs are whole, so a deviation within one job's size is unavoidable"},
	"guarantee_wait_seconds": {-1, "p50 and p99 of how long jobs within their team's guarantee (its use, its earlier waiting jobs and the job together within it) waited from submission to min-available members bound: " +
		"the time to get a guarantee back; a job that never started counts until the end"},
	"evicted_per_reclaimed_gpu":      {-1, "cards of the pods taken back from borrowing queues, over the cards asked by the jobs they were taken back for: 1 is no more than needed; - when nothing was taken back"},
	"idle_gpu_hours_while_fit_waits": {-1, "card-hours left idle while a waiting job would fit them (its missing members, each on the free cards of one node): capacity that admission strands; 0 is none"},
	"jobs_never_started":             {-1, "jobs (pod groups, pods in no group) that never had min-available members bound by the end of the run"},
}

// Better says which way a metric improves, in words: "lower", "higher",
// or "-" when neither.
func Better(key string) string {
	switch Metrics[key].Better {
	case +1:
		return "higher"
	case -1:
		return "lower"
	}
	return "-"
}

// directionNote is " (lower is better)", " (higher is better)", or "" for
// a metric with no direction, for a plot's title.
func directionNote(key string) string {
	if Metrics[key].Better == 0 {
		return ""
	}
	return " (" + Better(key) + " is better)"
}

// writeMeanings writes what each of keys means, with its direction, as a
// markdown list under the tables.
func writeMeanings(w io.Writer, keys []string) {
	fmt.Fprintln(w, "\nWhat the metrics mean:")
	for _, k := range keys {
		m, ok := Metrics[k]
		if !ok {
			continue
		}
		better := Better(k) + " is better"
		if m.Better == 0 {
			better = "no better or worse"
		}
		fmt.Fprintf(w, "- `%s` (%s): %s.\n", k, better, m.Meaning)
	}
}
