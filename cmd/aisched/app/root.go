// Package app holds the subcommands of the aisched binary.
package app

import (
	"errors"
	"fmt"
	"os"

	nrilog "github.com/containerd/nri/pkg/log"

	"github.com/aisched/aisched/pkg/agent/deliver"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// NewCommand returns the root command with every subcommand.
func NewCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "aisched",
		Short: "Scheduling engine for AI workloads on Kubernetes",
		Long: `aisched schedules AI inference and training workloads on Kubernetes
clusters with CPU and GPU nodes. Each subcommand is one component; "up" runs
a whole simulated cluster in this process.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newUpCommand(),
		newSchedulerCommand(),
		newAgentCommand(),
		newControllerCommand(),
		newGatewayCommand(),
		newConsoleCommand(),
		newDemoModelCommand(),
		newKubectlCommand(),
		newSimCommand(),
		newWhatifCommand(),
		newBenchCommand(),
		newCRDsCommand(),
		newVersionCommand(),
	)
	return root
}

// Main runs the command line and returns the process exit code. Errors are
// printed on one line, prefixed with the subcommand.
func Main(args []string) int {
	// kube-scheduler's packages register --version on the process-wide flag
	// set, which cobra shows on every command; it belongs to "scheduler".
	_ = pflag.CommandLine.MarkHidden("version")
	// controller-runtime (the platform's controller and gateway) logs
	// through its own process-wide logger: send it to klog, which each
	// command sets up.
	ctrllog.SetLogger(klog.NewKlogr())
	// So do NRI's runtime side (the simulated nodes' device path) and its
	// plugin stub (the agent's delivery hook).
	nrilog.Set(deliver.NRILogger{})
	root := NewCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err != nil {
		if !errors.As(err, &reportedError{}) {
			fmt.Fprintf(os.Stderr, "%s: %v\n", cmd.CommandPath(), err)
		}
		return 1
	}
	return 0
}
