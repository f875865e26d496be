package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aisched/aisched/pkg/bench"
	"github.com/aisched/aisched/pkg/scheduler"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure aisched against the default scheduler on the embedded control plane",
	}
	cmd.AddCommand(newBenchThroughputCommand())
	return cmd
}

func newBenchThroughputCommand() *cobra.Command {
	opts := bench.ThroughputOptions{Nodes: 5000, Pods: 10000}
	var profiles string
	var logFile, cpuProfile, child string
	cmd := &cobra.Command{
		Use:   "throughput",
		Short: "Pods scheduled per second by each profile, and their ratio, as JSON",
		Long: `Schedules the same pods with each profile, each on a fresh simulated cluster,
one after the other in this run, and prints pods/s per profile and the ratio
last/first as JSON. Pods are queued before the scheduler starts and the
simulated kubelets leave them alone, so the scheduler alone is measured.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Profiles = strings.Split(profiles, ",")
			// Stopping each cluster makes the apiserver's etcd client complain on
			// stderr; that goes to the log, progress to the terminal.
			progress, done, err := logToFile(logFile)
			if err != nil {
				return err
			}
			defer done()
			opts.Progress = progress
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if child != "" {
				r, err := bench.Measure(ctx, opts, child)
				if err != nil {
					return err
				}
				return enc.Encode(r)
			}
			if cpuProfile == "" {
				opts.Measure = measureInChild(cmd.Flags())
			}
			res, err := bench.Throughput(ctx, opts)
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
	fs.IntVar(&opts.Rounds, "rounds", 3, "measurements per profile, in alternating order; the median counts")
	fs.StringVar(&profiles, "profiles", "default-scheduler,"+scheduler.AischedProfile, "comma-separated cases: a profile, or profile@N to put every N pods in a pod group with min-available N, or native@N for upstream GangScheduling with native PodGroups of N (GenericWorkload gate); ratios are against the first")
	fs.DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "longest time to schedule one profile's pods")
	fs.StringVar(&logFile, "log-file", os.DevNull, "component log file (- for stderr)")
	fs.StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile (go tool pprof) to this file; measures in this process")
	fs.StringVar(&child, "measure-profile", "", "measure this one profile in this process and print its result (what each child process does)")
	_ = fs.MarkHidden("measure-profile")
	return cmd
}

// measureInChild runs each measurement as "aisched bench throughput
// --measure-profile P" with the same flags, in a fresh process.
func measureInChild(flags *pflag.FlagSet) func(context.Context, bench.ThroughputOptions, string) (bench.ProfileResult, error) {
	var args []string
	flags.Visit(func(f *pflag.Flag) {
		if f.Name != "rounds" && f.Name != "profiles" {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	return func(ctx context.Context, opts bench.ThroughputOptions, profile string) (bench.ProfileResult, error) {
		self, err := os.Executable()
		if err != nil {
			return bench.ProfileResult{}, err
		}
		cmd := exec.CommandContext(ctx, self, append([]string{"bench", "throughput", "--measure-profile=" + profile}, args...)...)
		cmd.Stderr = opts.Progress
		out, err := cmd.Output()
		if err != nil {
			return bench.ProfileResult{}, fmt.Errorf("measurement process: %w", err)
		}
		var r bench.ProfileResult
		if err := json.Unmarshal(out, &r); err != nil {
			return bench.ProfileResult{}, fmt.Errorf("measurement process printed %q: %w", out, err)
		}
		return r, nil
	}
}
