package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/whatif"
)

func newWhatifCommand() *cobra.Command {
	var file, kubeconfig, schedulerConfig, sharedConfig, namespace, format, logFile string
	var horizon time.Duration
	cmd := &cobra.Command{
		Use:   "whatif -f JOB.yaml",
		Short: "Tell whether a job would fit a cluster now, where, and if not, what would have to happen first",
		Long: `Reads the cluster (nodes, pods, GPU inventories, quotas, pod groups and
priority classes; list and get calls only, nothing is written), simulates
it with the real scheduler and the cluster's scheduler configuration, adds
the job's pods (a Pod, Job, Deployment, ReplicaSet, StatefulSet, and
PodGroups) and answers: the job fits now, on these nodes and cards; it fits
by preempting these pods; it fits once these running pods end, at this time
(pods whose end is known: simulated pods' run duration, or
activeDeadlineSeconds); or it never fits, and why. The cluster is aisched
up's by default.

  aisched whatif -f job.yaml
  aisched whatif -f job.yaml --kubeconfig ~/.kube/config --scheduler-config scheduler-config.yaml --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q: want text or json", format)
			}
			if horizon <= 0 || horizon > 365*24*time.Hour {
				return fmt.Errorf("--horizon %s: want more than 0 and at most 8760h", horizon)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("-f: %w", err)
			}
			job, err := whatif.ParseJob(file, data, namespace)
			if err != nil {
				return err
			}
			cfg, err := scheduler.ReadConfig(schedulerConfig)
			if err != nil {
				return fmt.Errorf("--scheduler-config: %w", err)
			}
			shared, err := aischedconfig.ReadShared(klog.Background(), sharedConfig)
			if err != nil {
				return fmt.Errorf("--shared-config: %w", err)
			}
			if kubeconfig == "" {
				kubeconfig = os.Getenv("KUBECONFIG")
			}
			if kubeconfig == "" {
				kubeconfig = filepath.Join(local.DefaultDataDir(), "kubeconfig")
			}
			restCfg, err := kubeRESTConfig(kubeconfig, "aisched-whatif")
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(restCfg)
			if err != nil {
				return err
			}
			aisched, err := versioned.NewForConfig(restCfg)
			if err != nil {
				return err
			}
			_, done, err := logToFile(logFile)
			if err != nil {
				return err
			}
			defer done()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			snap, err := whatif.Take(ctx, client, aisched)
			if err != nil {
				return err
			}
			ans, err := whatif.Run(ctx, snap, job, whatif.Options{SchedulerConfig: cfg, SharedConfig: shared, Horizon: horizon})
			if err != nil {
				return err
			}
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(ans)
			}
			return ans.WriteText(cmd.OutOrStdout(), snap.Taken)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&file, "filename", "f", "", "the job's manifests (Pod, Job, Deployment, ReplicaSet, StatefulSet, PodGroup)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (default $KUBECONFIG, else aisched up's)")
	fs.StringVar(&schedulerConfig, "scheduler-config", "", "the cluster's KubeSchedulerConfiguration (default aisched up's)")
	addSharedConfigFlag(fs, &sharedConfig, "the cluster's SharedConfiguration file (default: defaults)")
	fs.StringVarP(&namespace, "namespace", "n", "default", "namespace of the manifests' objects that name none")
	fs.DurationVar(&horizon, "horizon", whatif.DefaultHorizon, "how far ahead running pods are let end")
	fs.StringVar(&format, "format", "text", "output: text or json")
	fs.StringVar(&logFile, "log-file", os.DevNull, "component log file (- for stderr)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}
