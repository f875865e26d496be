package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/aisched/aisched/pkg/sim"
	"github.com/aisched/aisched/pkg/sim/report"
	"github.com/aisched/aisched/pkg/sim/scenario"
)

func newSimCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Replay scenarios on simulated clusters and compare scheduling policies",
	}
	cmd.AddCommand(newSimRunCommand())
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
			rep, err := sim.Run(ctx, s, sim.Options{Settle: settle, Progress: progress})
			if err != nil {
				return err
			}
			if out != "" {
				if err := writeReports(rep, out); err != nil {
					return err
				}
			}
			if format == "json" {
				return rep.WriteJSON(cmd.OutOrStdout())
			}
			return rep.WriteMarkdown(cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&format, "format", "table", "output: table (markdown) or json")
	fs.StringVar(&out, "out", "", "directory for report.json, report.csv and report.md")
	fs.DurationVar(&settle, "settle", 0, "how long no pod may be bound or end, after the last arrival, before a run ends (default: the scenario's settle)")
	fs.StringVar(&logFile, "log-file", os.DevNull, "component log file (- for stderr)")
	return cmd
}

// writeReports writes the report in every format to dir.
func writeReports(rep *report.Report, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer) error{
		"report.json": rep.WriteJSON, "report.csv": rep.WriteCSV, "report.md": rep.WriteMarkdown,
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
