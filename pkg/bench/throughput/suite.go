package throughput

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// Row is one line of the benchmark table: a cluster, its pods, the two
// cases compared on it, and the goal for the second's ratio to the first.
type Row struct {
	Name        string
	Nodes, Pods int
	GPU, Shared bool
	Fill        float64
	// RackNodes puts the nodes in racks of that many and each gang inside
	// one rack (Options.RackNodes); 0 without racks.
	RackNodes int
	// Baseline and Case are the cases compared, Case over Baseline.
	Baseline, Case string
	// Goal is the least ratio that meets the goal; with Above, the ratio
	// must exceed it.
	Goal  float64
	Above bool
	// Memory reports the memory of both cases in a table of its own.
	Memory bool
	// DRA claims the cards through DRA (Options.DRA).
	DRA bool
}

// goal writes the goal as the table shows it.
func (r Row) goal() string {
	if r.Above {
		return fmt.Sprintf("> %.2f", r.Goal)
	}
	return fmt.Sprintf(">= %.2f", r.Goal)
}

// met reports whether ratio meets the goal.
func (r Row) met(ratio float64) bool {
	if r.Above {
		return ratio > r.Goal
	}
	return ratio >= r.Goal
}

// Suite is the table `make bench` prints: the shipped aisched profile
// against upstream's default-scheduler (and, for gangs, aisched's
// Coscheduling against upstream GangScheduling) on CPU, whole-card and
// shared-card pods, on empty and busy GPU clusters, and at 15,000 nodes
// with the scheduler's memory; topology gangs, each inside one rack of 16
// nodes (128 cards), against upstream's topology-aware workload
// scheduling. Gang rows use 3,200 pods, a multiple of 4 and 16; the 90%
// row 1,000 pods, what one free card on each of 1,000 nodes holds. The
// DRA rows claim each pod's card through NVIDIA's DRA driver
// (Options.DRA), upstream's DynamicResources against aisched's
// GPUClaims, on 500 and 5,000 nodes.
var Suite = []Row{
	{Name: "CPU pods, 5,000 nodes, 10,000 pods", Nodes: 5000, Pods: 10000, Baseline: "default-scheduler", Case: "aisched", Goal: 0.95},
	{Name: "CPU pods, 15,000 nodes, 30,000 pods", Nodes: 15000, Pods: 30000, Baseline: "default-scheduler", Case: "aisched", Goal: 0.95, Memory: true},
	{Name: "whole-GPU pods, 1,000 nodes x 8 A100, 3,000 pods", Nodes: 1000, Pods: 3000, GPU: true, Baseline: "default-scheduler", Case: "aisched", Goal: 1},
	{Name: "the same, 50% of the cards held before", Nodes: 1000, Pods: 3000, GPU: true, Fill: 0.5, Baseline: "default-scheduler", Case: "aisched", Goal: 1, Above: true},
	{Name: "the same, 90% held before, 1,000 pods", Nodes: 1000, Pods: 1000, GPU: true, Fill: 0.9, Baseline: "default-scheduler", Case: "aisched", Goal: 1, Above: true},
	{Name: "shared pods (a quarter card each), 1,000 nodes, 3,000 pods", Nodes: 1000, Pods: 3000, Shared: true, Baseline: "default-scheduler", Case: "aisched", Goal: 0.95},
	{Name: "4-pod GPU gangs, 1,000 nodes, 3,200 pods: aisched@4 vs native@4", Nodes: 1000, Pods: 3200, GPU: true, Baseline: NativeCase + "@4", Case: "aisched@4", Goal: 1},
	{Name: "16-pod GPU gangs, 1,000 nodes, 3,200 pods: aisched@16 vs native@16", Nodes: 1000, Pods: 3200, GPU: true, Baseline: NativeCase + "@16", Case: "aisched@16", Goal: 1},
	{Name: "4-pod GPU gangs in one rack of 16 nodes, 1,000 nodes, 3,200 pods: aisched@4 vs native@4", Nodes: 1000, Pods: 3200, GPU: true, RackNodes: 16, Baseline: NativeCase + "@4", Case: "aisched@4", Goal: 1},
	{Name: "16-pod GPU gangs in one rack of 16 nodes, 1,000 nodes, 3,200 pods: aisched@16 vs native@16", Nodes: 1000, Pods: 3200, GPU: true, RackNodes: 16, Baseline: NativeCase + "@16", Case: "aisched@16", Goal: 1},
	{Name: "4-pod GPU gangs in one rack of 16 nodes, 5,000 nodes, 3,200 pods: aisched@4 vs native@4", Nodes: 5000, Pods: 3200, GPU: true, RackNodes: 16, Baseline: NativeCase + "@4", Case: "aisched@4", Goal: 1},
	{Name: "16-pod GPU gangs in one rack of 16 nodes, 5,000 nodes, 3,200 pods: aisched@16 vs native@16", Nodes: 5000, Pods: 3200, GPU: true, RackNodes: 16, Baseline: NativeCase + "@16", Case: "aisched@16", Goal: 1},
	// DRA: upstream's DynamicResources (first fit) against GPUClaims.
	{Name: "DRA whole-GPU pods (a ResourceClaim each), 500 nodes x 8 A100, 2,000 pods", Nodes: 500, Pods: 2000, GPU: true, DRA: true, Baseline: "default-scheduler", Case: "aisched", Goal: 1},
	{Name: "DRA whole-GPU pods (a ResourceClaim each), 5,000 nodes x 8 A100, 2,000 pods", Nodes: 5000, Pods: 2000, GPU: true, DRA: true, Baseline: "default-scheduler", Case: "aisched", Goal: 1},
}

// RowResult is a row as measured.
type RowResult struct {
	Row    Row
	Result *Result
	// Took is the row's time, clusters' starts included.
	Took time.Duration
}

// RunSuite measures each row with base's rounds, scheduler configuration,
// progress, profiles and measure function (its cluster and cases are the
// row's), one row after the other.
func RunSuite(ctx context.Context, rows []Row, base Options) ([]RowResult, error) {
	var out []RowResult
	for i, row := range rows {
		opts := base
		opts.Nodes, opts.Pods, opts.GPU, opts.Shared, opts.Fill, opts.RackNodes = row.Nodes, row.Pods, row.GPU, row.Shared, row.Fill, row.RackNodes
		opts.Profiles = []string{row.Baseline, row.Case}
		opts.DRA = row.DRA
		if base.ProfilePrefix != "" {
			opts.ProfilePrefix = fmt.Sprintf("%s-row%d", base.ProfilePrefix, i+1)
		}
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "row %d of %d: %s\n", i+1, len(rows), row.Name)
		}
		begin := time.Now()
		res, err := Run(ctx, opts)
		if err != nil {
			return out, fmt.Errorf("%s: %w", row.Name, err)
		}
		out = append(out, RowResult{Row: row, Result: res, Took: time.Since(begin)})
	}
	return out, nil
}

// WriteTable writes the suite's results as markdown: pods/s of each case
// (median of the rounds, every round in brackets), the ratio against the
// goal, and the load averages the measurements began and ended at; then
// the memory of the rows that report it.
func WriteTable(w io.Writer, results []RowResult) error {
	var b strings.Builder
	rounds := 0
	if len(results) > 0 {
		rounds = max(len(results[0].Result.Profiles[0].Rounds), 1)
	}
	fmt.Fprintf(&b, "Measured on %d cores (%s), %d rounds per case in alternating order, median pods/s (every round's in brackets); load is the machine's 1-minute load average from the first measurement's start to the last one's end.\n\n",
		runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"), rounds)
	b.WriteString("| case | baseline pods/s | aisched pods/s | ratio | goal | met | load |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		base, c := r.Result.Profiles[0], r.Result.Profiles[1]
		ratio := r.Result.Ratios[c.Name]
		met := "no"
		if r.Row.met(ratio) {
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s: %s | %s: %s | %.2f | %s | %s | %.1f-%.1f |\n", r.Row.Name,
			base.Name, podsPerSecond(base), c.Name, podsPerSecond(c), ratio, r.Row.goal(), met, r.Result.Load[0], r.Result.Load[1])
	}
	var memory []RowResult
	for _, r := range results {
		if r.Row.Memory {
			memory = append(memory, r)
		}
	}
	if len(memory) > 0 {
		b.WriteString("\nMemory once every pod is bound (median round): the process runs the whole control plane, so its RSS is mostly not the scheduler's; the scheduler's heap is the live heap then less the same before the scheduler started.\n\n")
		b.WriteString("| case | process RSS MiB (peak) | scheduler heap MiB | heap ratio |\n| --- | --- | --- | --- |\n")
		for _, r := range memory {
			base := r.Result.Profiles[0].Memory
			for _, p := range r.Result.Profiles {
				ratio := "-"
				if base.SchedulerHeapMiB > 0 {
					ratio = fmt.Sprintf("%.2f", p.Memory.SchedulerHeapMiB/base.SchedulerHeapMiB)
				}
				fmt.Fprintf(&b, "| %s, %s | %.0f (%.0f) | %.0f | %s |\n", r.Row.Name, p.Name, p.Memory.RSSMiB, p.Memory.PeakRSSMiB, p.Memory.SchedulerHeapMiB, ratio)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// podsPerSecond is the median and, with several rounds, every round.
func podsPerSecond(p ProfileResult) string {
	s := fmt.Sprintf("%.1f", p.PodsPerSecond)
	if len(p.Rounds) > 1 {
		parts := make([]string, len(p.Rounds))
		for i, r := range p.Rounds {
			parts[i] = fmt.Sprintf("%.0f", r)
		}
		s += " [" + strings.Join(parts, " ") + "]"
	}
	return s
}
