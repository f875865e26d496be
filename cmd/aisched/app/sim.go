package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/sim"
	"github.com/aisched/aisched/pkg/sim/report"
	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/sim/trace"
	"github.com/aisched/aisched/pkg/simcluster"
	"github.com/aisched/aisched/pkg/simcluster/apiserver"
)

func newSimCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Replay scenarios on simulated clusters and compare scheduling policies",
	}
	cmd.AddCommand(newSimRunCommand(), newSimTraceCommand())
	return cmd
}

func newSimRunCommand() *cobra.Command {
	var format, out, logFile, engineName, traceDir, compare, configPath string
	var settle time.Duration
	var parallel int
	cmd := &cobra.Command{
		Use:   "run <scenario.yaml|directory>...",
		Short: "Run scenarios under each of their policies and report the metrics side by side",
		Long: `Runs each scenario's workload under each policy and seed, each on a fresh
simulated cluster with the real scheduler, and prints the metrics: a
markdown table (--format table) or JSON (--format json). With --out, the
JSON, CSV and markdown reports are also written to that directory. The file
format is described in docs/scenarios.md.

A directory runs every scenario file (*.yaml) in it. Several scenarios make
the experiment matrix: one report that compares two policies (--compare,
default-scheduler against aisched) on every metric of every scenario, then
each scenario's own table. Trace scenarios need the trace's directory
(--trace-dir); without it they are listed as not run.

  aisched sim run scenarios/ --trace-dir ~/alibaba-gpu-v2023`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" {
				return fmt.Errorf("--format %q: want table or json", format)
			}
			engine, err := engineOf(engineName)
			if err != nil {
				return err
			}
			if parallel < 0 || parallel > maxParallel {
				return fmt.Errorf("--parallel %d: want 1 to %d (0: the default)", parallel, maxParallel)
			}
			base, candidate, ok := strings.Cut(compare, ",")
			if !ok || base == "" || candidate == "" || strings.Contains(candidate, ",") {
				return fmt.Errorf("--compare %q: want two policies, base,candidate", compare)
			}
			scenarios, err := scenario.LoadAll(args)
			if err != nil {
				return err
			}
			progress, done, err := logToFile(logFile)
			if err != nil {
				return err
			}
			defer done()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts := sim.Options{Engine: engine, Settle: settle, Parallel: parallel, Progress: progress, TraceDir: traceDir}
			if configPath != "" {
				if opts.SchedulerConfig, err = scheduler.ReadConfig(configPath); err != nil {
					return fmt.Errorf("--scheduler-config: %w", err)
				}
			}
			matrix := &report.Matrix{Base: base, Candidate: candidate}
			begin := time.Now()
			for _, s := range scenarios {
				opts.Tick = sim.Ticker(progress, s.Name)
				rep, err := sim.Run(ctx, s, opts)
				switch {
				case errors.Is(err, sim.ErrNoTraceDir) && len(scenarios) > 1:
					fmt.Fprintf(progress, "%s: not run: %v\n", s.Name, err)
					matrix.Skipped = append(matrix.Skipped, report.Skipped{Scenario: s.Name, Reason: err.Error()})
					continue
				case err != nil:
					return fmt.Errorf("scenario %s: %w", s.Name, err)
				}
				matrix.Reports = append(matrix.Reports, rep)
			}
			fmt.Fprintf(progress, "wall time %s for %d scenarios\n", time.Since(begin).Round(100*time.Millisecond), len(matrix.Reports))
			if len(scenarios) == 1 {
				return emit(cmd.OutOrStdout(), matrix.Reports[0], format, out)
			}
			return emitMatrix(cmd.OutOrStdout(), matrix, format, out)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&format, "format", "table", "output: table (markdown) or json")
	fs.StringVar(&out, "out", "", "directory for report.json, report.csv, report.md and report.svg (one subdirectory per scenario, and matrix.md and matrix.json, for several)")
	fs.DurationVar(&settle, "settle", 0, "how long no pod may be bound or end, after the last arrival, before a run ends (default: the scenario's settle)")
	fs.StringVar(&logFile, "log-file", os.DevNull, "component log file (- for stderr)")
	fs.StringVar(&traceDir, "trace-dir", "", "directory of the trace files that trace scenarios name (the Alibaba GPU trace's openb CSV files)")
	fs.StringVar(&compare, "compare", "default-scheduler,aisched", "the two policies the matrix compares: base,candidate")
	fs.StringVar(&configPath, "scheduler-config", "", "KubeSchedulerConfiguration for the policies that name no file of their own, instead of aisched up's (to try a variant profile on every scenario)")
	addEngineFlags(fs, &engineName, &parallel)
	return cmd
}

// maxParallel bounds --parallel.
const maxParallel = 64

// engineOf is the engine --engine names.
func engineOf(name string) (simcluster.Engine, error) {
	for _, e := range []simcluster.Engine{simcluster.Fast, apiserver.Engine} {
		if e.Name == name {
			return e, nil
		}
	}
	return simcluster.Engine{}, fmt.Errorf("--engine %q: want %s or %s", name, simcluster.Fast.Name, apiserver.Engine.Name)
}

// addEngineFlags adds --engine and --parallel.
func addEngineFlags(fs *pflag.FlagSet, name *string, parallel *int) {
	fs.StringVar(name, "engine", simcluster.Fast.Name, "fast: the real scheduler on an in-memory API with a virtual clock (no quotas, no controllers); apiserver: on the embedded kube-apiserver and etcd, in real time")
	fs.IntVar(parallel, "parallel", 0, "runs (policy x seed) at once, 1 to 64; default one per core with the fast engine, 1 with the apiserver engine")
}

func newSimTraceCommand() *cobra.Command {
	var nodesPath, podsPath, seeds, format, out, logFile, configPath, engineName, cpuProfile string
	var policies []string
	var inflate float64
	var parallel int
	var typicalFromTrace, dra bool
	cmd := &cobra.Command{
		Use:   "trace --nodes NODES.csv --pods PODS.csv --policy PROFILE...",
		Short: "Replay an Alibaba GPU trace (openb CSV) with the FGD paper's protocol",
		Long: `Replays an openb pod list of the Alibaba GPU cluster trace v2023 on its node
list, as the FGD paper (USENIX ATC '23) evaluates schedulers: for each seed
the pods are shuffled and inflated with random copies to --inflate times
the cluster's GPU capacity, then created one at a time on a fresh simulated
cluster with the real scheduler; a pod that does not fit is not retried.
It reports the unallocated GPU percentage where the arrived GPU request
equals 100% of capacity, the curve from 80% to 130%, and the pods the
cluster cannot express. With several seeds each metric is the median, and
--format json lists every seed. docs/scenarios.md describes the protocol.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" {
				return fmt.Errorf("--format %q: want table or json", format)
			}
			seedList, err := parseSeeds(seeds)
			if err != nil {
				return err
			}
			engine, err := engineOf(engineName)
			if err != nil {
				return err
			}
			if parallel < 0 || parallel > maxParallel {
				return fmt.Errorf("--parallel %d: want 1 to %d (0: the default)", parallel, maxParallel)
			}
			if len(policies) == 0 {
				return errors.New("--policy: name at least one scheduler profile")
			}
			if err := trace.CheckInflate(inflate); err != nil {
				return fmt.Errorf("--inflate %w", err)
			}
			nodes, pods, err := trace.ReadFiles(nodesPath, podsPath)
			if err != nil {
				return err
			}
			opts := sim.ReplayOptions{
				Engine: engine, Parallel: parallel, Name: filepath.Base(podsPath), Nodes: nodes, Pods: pods,
				Policies: sim.ProfilePolicies(policies...), Seeds: seedList, Inflate: inflate, TypicalPodsFromTrace: typicalFromTrace, DRA: dra,
			}
			if configPath != "" {
				var err error
				if opts.SchedulerConfig, err = scheduler.ReadConfig(configPath); err != nil {
					return err
				}
			}
			terminal, done, err := logToFile(logFile)
			if err != nil {
				return err
			}
			defer done()
			opts.Progress = terminal
			opts.Tick = sim.Ticker(terminal, "pods")
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("--cpu-profile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpu-profile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			begin := time.Now()
			rep, err := sim.Replay(ctx, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(terminal, "wall time %s for %d policies x %d seeds\n", time.Since(begin).Round(time.Second), len(policies), len(seedList))
			return emit(cmd.OutOrStdout(), rep, format, out)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&nodesPath, "nodes", "", "node list (sn,cpu_milli,memory_mib,gpu,model), e.g. openb_node_list_gpu_node.csv")
	fs.StringVar(&podsPath, "pods", "", "pod list in the 11- or 5-column openb form, e.g. openb_pod_list_default.csv")
	fs.StringSliceVar(&policies, "policy", nil, "scheduler profile to replay with; repeat or separate with commas (e.g. BestFit,DotProd,aisched)")
	fs.StringVar(&seeds, "seeds", "42", "seeds: a list and ranges, e.g. 42-51 or 42,45")
	fs.Float64Var(&inflate, "inflate", 1.3, "GPU request of the sequence in multiples of the cluster's GPU capacity")
	fs.StringVar(&configPath, "scheduler-config", "", "KubeSchedulerConfiguration holding the profiles (default: the built-in one of aisched up)")
	fs.BoolVar(&typicalFromTrace, "typical-pods-from-trace", false, "give FGD the pod list's shapes as its typicalPods argument, as the FGD paper's simulator does, instead of learning them online")
	fs.BoolVar(&dra, "dra", false, "request GPUs through ResourceClaims of NVIDIA's DRA driver: the nodes publish each card with 1000 consumable shares, each GPU pod claims its cards or its share; every profile can then express shared pods (default-scheduler places them with upstream's first-fit allocator)")
	fs.StringVar(&format, "format", "table", "output: table (markdown) or json")
	fs.StringVar(&out, "out", "", "directory for report.json, report.csv, report.md and report.svg")
	fs.StringVar(&logFile, "log-file", os.DevNull, "component log file (- for stderr)")
	fs.StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the replay (go tool pprof) to this file")
	addEngineFlags(fs, &engineName, &parallel)
	_ = cmd.MarkFlagRequired("nodes")
	_ = cmd.MarkFlagRequired("pods")
	return cmd
}

// maxSeeds bounds --seeds: each seed is a whole run per policy.
const maxSeeds = 1000

// parseSeeds reads "42-51", "42,45" or a mix into seeds, in order.
func parseSeeds(s string) ([]int64, error) {
	var seeds []int64
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		first, err := strconv.ParseInt(lo, 10, 64)
		last := first
		if err == nil && isRange {
			last, err = strconv.ParseInt(hi, 10, 64)
		}
		if err != nil || last < first || last-first >= maxSeeds || len(seeds)+int(last-first) >= maxSeeds {
			return nil, fmt.Errorf("--seeds %q: want whole numbers and ranges such as 42-51 (at most %d seeds)", s, maxSeeds)
		}
		for seed := first; seed <= last; seed++ {
			seeds = append(seeds, seed)
		}
	}
	return seeds, nil
}

// emit prints the report in format (table or json) and, with a directory
// out, writes it there in every format.
func emit(w io.Writer, rep *report.Report, format, out string) error {
	if out != "" {
		if err := rep.WriteFiles(out); err != nil {
			return err
		}
	}
	if format == "json" {
		return rep.WriteJSON(w)
	}
	return rep.WriteMarkdown(w)
}

// emitMatrix prints the matrix in format and, with a directory out, writes
// its files there (Matrix.WriteFiles).
func emitMatrix(w io.Writer, m *report.Matrix, format, out string) error {
	if out != "" {
		if err := m.WriteFiles(out); err != nil {
			return err
		}
	}
	if format == "json" {
		return m.WriteJSON(w)
	}
	return m.WriteMarkdown(w)
}
