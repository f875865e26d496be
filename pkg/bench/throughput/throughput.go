// Package throughput measures the scheduler's throughput against upstream's
// default-scheduler in the same run on the same machine: the same pods on
// the same simulated cluster (the embedded control plane), one case after
// the other in alternating rounds, so that only the ratio is compared
// (aisched bench throughput). Besides pods per second it reports what the
// scheduler spent at each extension point per pod, its memory, and the
// machine's load while it ran; Suite is the table `make bench` prints.
package throughput

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/aisched/aisched/pkg/podgroup"
)

// Options configure a throughput run.
type Options struct {
	// Nodes is the number of simulated nodes (32 CPU, 128Gi, 110 pods; 8
	// A100 GPUs each with GPU).
	Nodes int
	// Pods is the number of pods scheduled per profile (100m CPU, 256Mi;
	// one whole GPU each with GPU).
	Pods int
	// GPU makes nodes GPU nodes and pods whole-GPU pods.
	GPU bool
	// Shared makes nodes GPU nodes and pods that share a card: a quarter
	// of one each (gpu.aisched.io/milli: 250). A profile without GPUFit
	// schedules them as CPU pods.
	Shared bool
	// Fill is the share of every node's cards held before the pods come,
	// by pods bound past the scheduler (0 to 0.9): a busy cluster, where
	// more nodes are full.
	Fill float64
	// RackNodes, when set, puts every RackNodes consecutive nodes in a
	// rack (node label RackLabel; the last rack holds the rest) and every
	// gang of a grouped case inside one rack: aisched's with
	// topology.aisched.io/required on an aisched Topology of the racks,
	// native PodGroups with schedulingConstraints.topology
	// (TopologyAwareWorkloadScheduling gate). 0 to Nodes; the run fails
	// when a gang is not inside one rack. Plain cases ignore the racks.
	RackNodes int
	// DRA makes the GPU nodes of GPU publish their cards through NVIDIA's
	// DRA driver, and each pod claim one whole card through a
	// ResourceClaim of its own instead of nvidia.com/gpu; the run fails
	// unless every claim is allocated and no device is given twice. Needs
	// GPU, and neither Shared nor Fill.
	DRA bool
	// Profiles are the cases compared, each a profile name, optionally
	// with a pod group size: "aisched@4" puts every 4 consecutive pods in a
	// pod group with min-available 4 (the pod-group labels); profiles without
	// Coscheduling schedule them as plain pods. "native@4" is upstream gang
	// scheduling (NativeCase). Ratios are against the first case.
	Profiles []string
	// Rounds is how often each profile is measured, in alternating order
	// (A B, B A, A B, ...) so that what one measurement leaves behind in the
	// process does not favour one profile; the median counts. Default 1.
	Rounds int
	// SchedulerConfig holds the profiles measured, but default-scheduler
	// (always upstream's); nil: the built-in one of aisched up.
	SchedulerConfig *config.KubeSchedulerConfiguration
	// Timeout bounds the scheduling of one profile's pods.
	Timeout time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// ProfilePrefix, when set, makes Run profile every measurement into
	// ProfilePrefix-<case>-r<round> (Measure's ProfileTo).
	ProfilePrefix string
	// ProfileTo, when set, makes Measure write ProfileTo.cpu.pprof, a CPU
	// profile of this process from the scheduler's start to the last pod
	// bound (the scheduler's work and the apiserver's serving it, without
	// the cluster's start), and ProfileTo.heap.pprof, the heap once every
	// pod is bound (go tool pprof).
	ProfileTo string
	// Measure measures one case; default Measure in this process. The
	// command runs each measurement in a child process instead (InChild),
	// so that none inherits the heap a previous control plane left behind
	// (upstream components keep process-wide references to their caches)
	// and each process's memory is the measured case's.
	Measure MeasureFunc
}

// MeasureFunc measures one case ("profile" or "profile@N") with opts.
type MeasureFunc func(ctx context.Context, opts Options, name string) (ProfileResult, error)

// ProfileResult is the measurement of one case.
type ProfileResult struct {
	Name string `json:"name"`
	// PodsPerSecond is pods bound per second between the first and the last
	// binding; with several rounds, the median.
	PodsPerSecond float64 `json:"pods_per_second"`
	// Rounds lists pods/s of every round.
	Rounds []float64 `json:"rounds,omitempty"`
	// Seconds is the time from the first to the last binding.
	Seconds   float64 `json:"seconds"`
	Scheduled int     `json:"scheduled"`
	// CPUMillisPerPod is the CPU time this process spent from the
	// scheduler's start to the last binding, per pod bound: the
	// scheduler's and the apiserver's serving it. The same pods cost the
	// apiserver alike under every profile, so the difference between two
	// profiles is their schedulers'; a busy machine slows pods/s far more
	// than it inflates this.
	CPUMillisPerPod float64 `json:"cpu_ms_per_pod"`
	// Load is the machine's 1-minute load average when the scheduler
	// started and when the last pod was bound (0 where /proc has none).
	Load [2]float64 `json:"load"`
	// MicrosPerAttempt is the scheduler's wall time per scheduling attempt at
	// each extension point ("Filter", "Score", ...), and of the whole
	// algorithm ("Algorithm": PreFilter to NormalizeScore), in
	// microseconds, from kube-scheduler's own histograms.
	MicrosPerAttempt map[string]float64 `json:"us_per_attempt,omitempty"`
	// Batching counts the scheduler's opportunistic-batching outcomes
	// (scheduler_batch_attempts_total and scheduler_batch_cache_flushed_total
	// by result or reason) during this profile's run.
	Batching map[string]float64 `json:"batching,omitempty"`
	// Memory is the process's and the scheduler's memory once every pod
	// was bound.
	Memory Memory `json:"memory"`
	// NodesUsed is, with DRA, how many nodes the pods were placed on.
	NodesUsed int `json:"nodes_used,omitempty"`
}

// Result is the outcome of a run.
type Result struct {
	Nodes  int     `json:"nodes"`
	Pods   int     `json:"pods"`
	GPU    bool    `json:"gpu"`
	Shared bool    `json:"shared"`
	Fill   float64 `json:"fill"`
	// RackNodes is the nodes per rack; 0 without racks.
	RackNodes int             `json:"rack_nodes,omitempty"`
	CPUs      int             `json:"cpus"`
	Profiles  []ProfileResult `json:"profiles"`
	// Ratios are each case's pods/s over the first case's, by name.
	Ratios map[string]float64 `json:"ratios"`
	// Load is the lowest and the highest 1-minute load average any
	// measurement began or ended at.
	Load [2]float64 `json:"load"`
	// DRA is whether the pods claimed their cards through DRA.
	DRA bool `json:"dra,omitempty"`
}

// NativeCase is the case name of upstream gang scheduling: kube-scheduler's
// default profile with the GenericWorkload gate on, every N pods of
// "native@N" in a native PodGroup (scheduling.k8s.io/v1beta1, gang policy,
// minCount N) that the upstream GangScheduling plugin gangs; with racks,
// also the TopologyAwareWorkloadScheduling gate, whose
// TopologyPlacementGenerator places each group inside one rack.
const NativeCase = "native"

// benchCase is one case of a run: "profile" or "profile@N".
type benchCase struct {
	name    string
	profile string
	// groupSize is the pod group size; 0 for plain pods.
	groupSize int
	// native puts the groups in native PodGroups instead of the pod-group labels.
	native bool
}

// parseCase parses a case, "profile" or "profile@N".
func parseCase(c string, pods int) (benchCase, error) {
	bc := benchCase{name: c}
	var size string
	var grouped bool
	bc.profile, size, grouped = strings.Cut(c, "@")
	if bc.profile == NativeCase {
		if !grouped {
			return benchCase{}, fmt.Errorf("case %q: give the group size, %s@N", c, NativeCase)
		}
		bc.profile, bc.native = "default-scheduler", true
	}
	if !grouped {
		return bc, nil
	}
	n, err := strconv.Atoi(size)
	switch {
	case err != nil || n < 2 || n > podgroup.MaxMinAvailable:
		return benchCase{}, fmt.Errorf("case %q: group size %q must be a whole number from 2 to %d", c, size, podgroup.MaxMinAvailable)
	case pods%n != 0:
		return benchCase{}, fmt.Errorf("case %q: --pods %d is not a multiple of the group size %d: the last group could never gather", c, pods, n)
	}
	bc.groupSize = n
	return bc, nil
}

// Run schedules opts.Pods pods with each case, each on a fresh cluster of
// opts.Nodes nodes, opts.Rounds times in alternating order. Pods are
// created before the scheduler starts, and the simulated kubelets leave
// them alone, so the measure is the scheduler's alone (like upstream
// scheduler_perf).
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.Nodes < 1 || opts.Pods < 1 || len(opts.Profiles) < 1 {
		return nil, errors.New("need at least one node, one pod and one profile")
	}
	if err := checkDRA(opts); err != nil {
		return nil, err
	}
	for _, c := range opts.Profiles {
		if _, err := parseCase(c, opts.Pods); err != nil {
			return nil, err
		}
	}
	if err := checkFill(opts); err != nil {
		return nil, err
	}
	if err := checkRacks(opts); err != nil {
		return nil, err
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Minute
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	if opts.Rounds < 1 {
		opts.Rounds = 1
	}
	if opts.Measure == nil {
		opts.Measure = Measure
	}
	res := &Result{Nodes: opts.Nodes, Pods: opts.Pods, GPU: opts.GPU, Shared: opts.Shared, Fill: opts.Fill, RackNodes: opts.RackNodes, CPUs: runtime.NumCPU(), Ratios: map[string]float64{}}
	samples := make([][]ProfileResult, len(opts.Profiles))
	for round := range opts.Rounds {
		order := make([]int, len(opts.Profiles))
		for i := range order {
			order[i] = i
			if round%2 == 1 {
				order[i] = len(order) - 1 - i
			}
		}
		for _, i := range order {
			profile := opts.Profiles[i]
			o := opts
			if opts.ProfilePrefix != "" {
				o.ProfileTo = fmt.Sprintf("%s-%s-r%d", opts.ProfilePrefix, strings.ReplaceAll(profile, "@", "_"), round+1)
			}
			r, err := opts.Measure(ctx, o, profile)
			if err != nil {
				return nil, fmt.Errorf("profile %s: %w", profile, err)
			}
			on := ""
			if r.NodesUsed > 0 {
				on = fmt.Sprintf(" on %d nodes", r.NodesUsed)
			}
			fmt.Fprintf(progress, "%s (round %d): %d pods%s in %.1fs, %.1f pods/s, load %.1f-%.1f\n", profile, round+1, r.Scheduled, on, r.Seconds, r.PodsPerSecond, r.Load[0], r.Load[1])
			samples[i] = append(samples[i], r)
			if round == 0 && i == order[0] {
				res.Load = r.Load
			}
			res.Load = [2]float64{min(res.Load[0], r.Load[0], r.Load[1]), max(res.Load[1], r.Load[0], r.Load[1])}
		}
	}
	for _, s := range samples {
		res.Profiles = append(res.Profiles, median(s))
	}
	if first := res.Profiles[0].PodsPerSecond; first > 0 {
		for _, p := range res.Profiles {
			res.Ratios[p.Name] = p.PodsPerSecond / first
		}
	}
	res.DRA = opts.DRA
	return res, nil
}

// median returns the round with the median pods/s, with every round's pods/s.
func median(rounds []ProfileResult) ProfileResult {
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b ProfileResult) int { return cmp.Compare(a.PodsPerSecond, b.PodsPerSecond) })
	m := sorted[len(sorted)/2]
	if len(rounds) > 1 {
		for _, r := range rounds {
			m.Rounds = append(m.Rounds, r.PodsPerSecond)
		}
	}
	return m
}
