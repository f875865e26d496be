package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aisched/aisched/pkg/bench/latency"
	"github.com/aisched/aisched/pkg/bench/throughput"
	"github.com/aisched/aisched/pkg/scheduler"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure aisched: the scheduler against the default one, the gateway's added latency",
	}
	cmd.AddCommand(newBenchThroughputCommand(), newBenchGatewayCommand())
	return cmd
}

func newBenchThroughputCommand() *cobra.Command {
	opts := throughput.Options{Nodes: 5000, Pods: 10000}
	var profiles, rows, format string
	var logFile, child, configPath string
	var suite bool
	cmd := &cobra.Command{
		Use:   "throughput",
		Short: "Pods scheduled per second by each profile, and their ratio, as JSON or a table",
		Long: `Schedules the same pods with each profile, each on a fresh simulated cluster
in a process of its own, one after the other in alternating rounds, and
prints pods/s per profile and the ratio to the first, with the scheduler's
time per extension point, its memory and the machine's load, as JSON. Pods
are queued before the scheduler starts and the simulated kubelets leave
them alone, so the scheduler alone is measured.

With --suite it measures the rows of the benchmark table instead (CPU,
whole-card and shared pods, busy GPU clusters, gangs, gangs inside one
rack, 15,000 nodes with memory; --rows picks some) and, with --format table, prints it as markdown:

  aisched bench throughput --suite --format table`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Profiles = strings.Split(profiles, ",")
			if format != "json" && format != "table" {
				return fmt.Errorf("--format %q: want json or table", format)
			}
			picked, err := suiteRows(suite, rows)
			if err != nil {
				return err
			}
			if format == "table" && !suite {
				return errors.New("--format table: give --suite (one run's JSON has no table)")
			}
			if configPath != "" {
				if opts.SchedulerConfig, err = scheduler.ReadConfig(configPath); err != nil {
					return err
				}
			}
			// Stopping each cluster makes the apiserver's etcd client complain on
			// stderr; that goes to the log, progress to the terminal.
			progress, done, err := logToFile(logFile)
			if err != nil {
				return err
			}
			defer done()
			opts.Progress = progress
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if child != "" {
				r, err := throughput.Measure(ctx, opts, child)
				if err != nil {
					return err
				}
				return enc.Encode(r)
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			opts.Measure = throughput.InChild(append([]string{self, "bench", "throughput"}, childArgs(cmd.Flags())...)...)
			if suite {
				res, err := throughput.RunSuite(ctx, picked, opts)
				if err != nil {
					return err
				}
				if format == "table" {
					return throughput.WriteTable(cmd.OutOrStdout(), res)
				}
				return enc.Encode(res)
			}
			res, err := throughput.Run(ctx, opts)
			if err != nil {
				return err
			}
			return enc.Encode(res)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&opts.Nodes, "nodes", opts.Nodes, "simulated nodes")
	fs.IntVar(&opts.Pods, "pods", opts.Pods, "pods per profile")
	fs.BoolVar(&opts.GPU, "gpu", false, "GPU nodes (8 A100 each) and whole-GPU pods (1 GPU each)")
	fs.BoolVar(&opts.Shared, "shared", false, "GPU nodes (8 A100 each) and pods that share a card (a quarter of one each, gpu.aisched.io/milli: 250)")
	fs.BoolVar(&opts.DRA, "dra", false, "with --gpu, the nodes publish their cards through NVIDIA's DRA driver (ResourceSlices) and each pod claims one through a ResourceClaim instead of nvidia.com/gpu; fails unless every claim is allocated and no device given twice")
	fs.Float64Var(&opts.Fill, "fill", 0, "share of every node's cards held before the pods come (0 to 0.9), by pods bound past the scheduler")
	fs.IntVar(&opts.RackNodes, "rack-nodes", 0, "put every N nodes in a rack (node label "+throughput.RackLabel+") and each gang of the grouped cases inside one rack: aisched's with topology.aisched.io/required, native@N's PodGroups with schedulingConstraints.topology (TopologyAwareWorkloadScheduling gate); 0 to --nodes, 0 for no racks")
	fs.IntVar(&opts.Rounds, "rounds", 3, "measurements per profile, in alternating order; the median counts")
	fs.StringVar(&profiles, "profiles", "default-scheduler,"+scheduler.AischedProfile, "comma-separated cases: a profile, or profile@N to put every N pods in a pod group with min-available N, or native@N for upstream GangScheduling with native PodGroups of N (GenericWorkload gate); ratios are against the first")
	fs.BoolVar(&suite, "suite", false, "measure the rows of the benchmark table (make bench) instead of --nodes, --pods, --gpu, --shared, --dra, --fill, --rack-nodes and --profiles")
	fs.StringVar(&rows, "rows", "", "with --suite, the rows to measure, comma-separated numbers from 1 (default: every row)")
	fs.StringVar(&format, "format", "json", "output: json, or table (markdown; with --suite)")
	fs.DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "longest time to schedule one profile's pods")
	fs.StringVar(&logFile, "log-file", os.DevNull, "component log file (- for stderr)")
	fs.StringVar(&opts.ProfilePrefix, "profile", "", "write, for each measurement, a CPU profile of its scheduling (the scheduler's start to the last binding) and its heap at the end to PREFIX-<case>-r<round>.cpu.pprof and .heap.pprof (go tool pprof)")
	fs.StringVar(&configPath, "scheduler-config", "", "KubeSchedulerConfiguration holding the profiles measured (default: the built-in one of aisched up); default-scheduler is always upstream's")
	fs.StringVar(&child, "measure-profile", "", "measure this one case in this process and print its result (what each child process does)")
	fs.StringVar(&opts.ProfileTo, "measure-profile-to", "", "with --measure-profile, the prefix of its profiles")
	_ = fs.MarkHidden("measure-profile")
	_ = fs.MarkHidden("measure-profile-to")
	return cmd
}

// childArgs are the flags a measurement process gets: the ones given,
// but those that pick the cases and rounds, which the parent runs, and
// the cluster's, which InChild passes with each case (a suite's rows
// differ).
func childArgs(flags *pflag.FlagSet) []string {
	var args []string
	flags.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "rounds", "profiles", "suite", "rows", "format", "profile", "nodes", "pods", "gpu", "shared", "fill", "rack-nodes", "dra":
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return args
}

// suiteRows returns the rows of throughput.Suite that --rows picks.
func suiteRows(suite bool, rows string) ([]throughput.Row, error) {
	switch {
	case !suite && rows != "":
		return nil, errors.New("--rows: give --suite too")
	case rows == "":
		return throughput.Suite, nil
	}
	var picked []throughput.Row
	for _, f := range strings.Split(rows, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > len(throughput.Suite) {
			return nil, fmt.Errorf("--rows %q: want numbers from 1 to %d", rows, len(throughput.Suite))
		}
		picked = append(picked, throughput.Suite[n-1])
	}
	return picked, nil
}

func newBenchGatewayCommand() *cobra.Command {
	opts := latency.GatewayOptions{Duration: 20 * time.Second, Warmup: 2 * time.Second, Idle: 5 * time.Second, Connections: 64}
	rates, format := "1000,2000,5000,10000", "json"
	var backend string
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "The gateway's added p50/p99 latency under load on loopback, as JSON or a table",
		Long: `Runs the demo model (aisched demo-model) and a gateway in front of it
(one AIService with API-key auth, an IP allow list, request control, rate
limits and a circuit breaker, none of which rejects the load) as two child
processes on loopback, and loads both with an open-loop generator in this
process: at each rate, the demo model called directly, then through the
gateway, each for --duration after --warmup. Latency runs from when each
request was due (or from when its worker, waiting for it, woke up) to the
end of its answer, so a generator that falls behind counts its delay. Prints each run's achieved rate and percentiles, the
gateway's added p50 and p99, the highest rate both sustained (95% of it
achieved, every answer 200), and the gateway's goroutines and heap in use
before the first run and after the last (and --idle). Progress goes to
stderr.

  aisched bench gateway --format table --rates 1000,5000 --duration 20s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if backend != "" {
				ctx, cancel := latency.UntilStdinCloses(ctx, cmd.InOrStdin())
				defer cancel()
				if err := latency.ServeGateway(ctx, backend, cmd.OutOrStdout()); err != nil {
					return fmt.Errorf("--serve-gateway: %w", err)
				}
				return nil
			}
			var err error
			if opts.Rates, err = latency.ParseRates(rates); err != nil {
				return fmt.Errorf("--rates: %w", err)
			}
			switch {
			case opts.Duration <= 0:
				return fmt.Errorf("--duration %s: want a positive duration", opts.Duration)
			case opts.Warmup < 0:
				return fmt.Errorf("--warmup %s: negative", opts.Warmup)
			case opts.Idle < 0:
				return fmt.Errorf("--idle %s: negative", opts.Idle)
			case opts.Connections < 1:
				return fmt.Errorf("--connections %d: want at least 1", opts.Connections)
			case format != "json" && format != "table":
				return fmt.Errorf("--format %q: want json or table", format)
			}
			opts.Progress = cmd.ErrOrStderr()
			self, err := os.Executable()
			if err != nil {
				return err
			}
			res, err := latency.GatewayLatencyInChildren(ctx, opts, latency.Processes{
				Backend: []string{self, "demo-model", "--bind-address", "127.0.0.1:0"},
				Gateway: []string{self, "bench", "gateway", "--serve-gateway"},
			})
			if err != nil {
				return err
			}
			if format == "table" {
				return res.WriteTable(cmd.OutOrStdout())
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&rates, "rates", rates, "comma-separated request rates per second, measured one after the other")
	fs.DurationVar(&opts.Duration, "duration", opts.Duration, "length of each measured run")
	fs.DurationVar(&opts.Warmup, "warmup", opts.Warmup, "load at the same rate, not recorded, before each run")
	fs.DurationVar(&opts.Idle, "idle", opts.Idle, "pause after the last run before the gateway's goroutines and heap are counted again")
	fs.IntVar(&opts.Connections, "connections", opts.Connections, "keep-alive connections to each target, and the most requests in flight")
	fs.StringVar(&format, "format", format, "output: json, or table (markdown)")
	fs.StringVar(&backend, "serve-gateway", "", "serve the bench gateway in front of this backend address and print its addresses (what the gateway child process does)")
	_ = fs.MarkHidden("serve-gateway")
	return cmd
}
