package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/sim"
	"github.com/aisched/aisched/pkg/sim/report"
	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/sim/trace"
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
	var format, out, logFile string
	var settle time.Duration
	cmd := &cobra.Command{
		Use:   "run <scenario.yaml>",
		Short: "Run a scenario under each of its policies and report the metrics side by side",
		Long: `Runs the scenario's workload under each policy and seed, each on a fresh
simulated cluster with the real scheduler, and prints the metrics: a
markdown table (--format table) or JSON (--format json). With --out, the
JSON, CSV and markdown reports are also written to that directory. The file
format is described in docs/scenarios.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" {
				return fmt.Errorf("--format %q: want table or json", format)
			}
			s, err := scenario.Load(args[0])
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
			opts := sim.Options{Settle: settle, Progress: progress}
			if term.IsTerminal(int(progress.Fd())) {
				opts.Tick = progressBar(progress, "arrived")
			}
			rep, err := sim.Run(ctx, s, opts)
			if err != nil {
				return err
			}
			return emit(cmd.OutOrStdout(), rep, format, out)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&format, "format", "table", "output: table (markdown) or json")
	fs.StringVar(&out, "out", "", "directory for report.json, report.csv, report.md and report.svg")
	fs.DurationVar(&settle, "settle", 0, "how long no pod may be bound or end, after the last arrival, before a run ends (default: the scenario's settle)")
	fs.StringVar(&logFile, "log-file", os.DevNull, "component log file (- for stderr)")
	return cmd
}

func newSimTraceCommand() *cobra.Command {
	var nodesPath, podsPath, seeds, format, out, logFile, configPath string
	var policies []string
	var inflate float64
	var typicalFromTrace bool
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
			if len(policies) == 0 {
				return errors.New("--policy: name at least one scheduler profile")
			}
			nodes, pods, err := readTrace(nodesPath, podsPath)
			if err != nil {
				return err
			}
			opts := sim.ReplayOptions{
				Name: filepath.Base(podsPath), Nodes: nodes, Pods: pods,
				Policies: policies, Seeds: seedList, Inflate: inflate, TypicalPodsFromTrace: typicalFromTrace,
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
			if term.IsTerminal(int(terminal.Fd())) {
				opts.Tick = progressBar(terminal, "pods")
			} else {
				opts.Tick = progressLines(terminal)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
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
	fs.StringVar(&format, "format", "table", "output: table (markdown) or json")
	fs.StringVar(&out, "out", "", "directory for report.json, report.csv, report.md and report.svg")
	fs.StringVar(&logFile, "log-file", os.DevNull, "component log file (- for stderr)")
	_ = cmd.MarkFlagRequired("nodes")
	_ = cmd.MarkFlagRequired("pods")
	return cmd
}

// readTrace reads a node and a pod list.
func readTrace(nodesPath, podsPath string) ([]trace.Node, []trace.Pod, error) {
	f, err := os.Open(nodesPath)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	nodes, err := trace.ReadNodes(f, nodesPath)
	if err != nil {
		return nil, nil, err
	}
	g, err := os.Open(podsPath)
	if err != nil {
		return nil, nil, err
	}
	defer g.Close()
	pods, err := trace.ReadPods(g, podsPath)
	if err != nil {
		return nil, nil, err
	}
	return nodes, pods, nil
}

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
		if err != nil || last < first || last-first >= 1000 {
			return nil, fmt.Errorf("--seeds %q: want whole numbers and ranges such as 42-51 (at most 1000 per range)", s)
		}
		for seed := first; seed <= last; seed++ {
			seeds = append(seeds, seed)
		}
	}
	return seeds, nil
}

// progressBar returns a Tick that redraws a bar on the terminal at most
// ten times a second, and ends the line when a run is done.
func progressBar(w io.Writer, unit string) func(done, total int) {
	var last time.Time
	return func(done, total int) {
		if done < total && time.Since(last) < 100*time.Millisecond {
			return
		}
		last = time.Now()
		const width = 40
		filled := width * done / max(total, 1)
		fmt.Fprintf(w, "\r[%s%s] %d/%d %s", strings.Repeat("#", filled), strings.Repeat(" ", width-filled), done, total, unit)
		if done == total {
			fmt.Fprintln(w)
		}
	}
}

// progressLines returns a Tick for a log or CI: a line at every tenth of
// a run, with the time since the run began.
func progressLines(w io.Writer) func(done, total int) {
	var begin time.Time
	return func(done, total int) {
		if done == 0 {
			begin = time.Now()
		}
		if step := max(total/10, 1); done > 0 && done%step == 0 {
			fmt.Fprintf(w, "%d/%d pods after %s\n", done, total, time.Since(begin).Round(time.Second))
		}
	}
}

// emit prints the report in format (table or json) and, with a directory
// out, writes it there in every format.
func emit(w io.Writer, rep *report.Report, format, out string) error {
	if out != "" {
		if err := writeReports(rep, out); err != nil {
			return err
		}
	}
	if format == "json" {
		return rep.WriteJSON(w)
	}
	return rep.WriteMarkdown(w)
}

// writeReports writes the report in every format to dir.
func writeReports(rep *report.Report, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer) error{
		"report.json": rep.WriteJSON, "report.csv": rep.WriteCSV, "report.md": rep.WriteMarkdown, "report.svg": rep.WriteSVG,
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := write(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
