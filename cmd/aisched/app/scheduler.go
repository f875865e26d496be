package app

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/cache"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	kubescheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"sigs.k8s.io/yaml"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/util/yamlfile"
)

// newSchedulerCommand is kube-scheduler's command (every upstream flag, a
// KubeSchedulerConfiguration file, leader election) with aisched's plugin
// registry. It follows app.NewSchedulerCommand and differs in one point:
// --kubeconfig is honoured together with --config when the file leaves
// clientConnection.kubeconfig empty (upstream silently ignores the flag).
func newSchedulerCommand() *cobra.Command {
	opts := options.NewOptions()
	var sharedConfig string
	var printConfig bool
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run kube-scheduler with aisched's plugins compiled in",
		Long: `Run kube-scheduler with aisched's plugins compiled in. Every kube-scheduler
flag works. On a real cluster it runs as a Deployment next to (or instead of)
kube-scheduler; pods choose a profile with spec.schedulerName.

The state that every profile shares (the GPU ledger, the job queue) has its
own configuration, --shared-config (kind SharedConfiguration; defaults when
absent).

From your machine, against a cluster (aisched's profiles beside the
cluster's kube-scheduler):

  aisched scheduler --print-config > scheduler-config.yaml
  aisched scheduler --config scheduler-config.yaml --kubeconfig ~/.kube/config`,
		Args: cobra.NoArgs,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Feature gates must be set before RunE.
			return opts.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printConfig {
				cfg, err := scheduler.ClusterConfigYAML()
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(cfg)
				return err
			}
			return runScheduler(cmd, opts, sharedConfig)
		},
	}
	nfs := opts.Flags
	addSharedConfigFlag(nfs.FlagSet("aisched"), &sharedConfig,
		"The SharedConfiguration file (config.aisched.io/v1alpha1): GPU ledger and job queue settings shared by every profile; defaults when empty.")
	nfs.FlagSet("aisched").BoolVar(&printConfig, "print-config", false,
		"Print a KubeSchedulerConfiguration with aisched's profiles (the Helm chart's) for a scheduler run beside a cluster's kube-scheduler, and exit; pass it to --config.")
	verflag.AddFlags(nfs.FlagSet("global"))
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, f := range nfs.FlagSets {
		cmd.Flags().AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *nfs, cols)
	return cmd
}

func runScheduler(cmd *cobra.Command, opts *options.Options, sharedConfig string) error {
	verflag.PrintAndExitIfRequested()
	sharedCfg, err := aischedconfig.ReadShared(klog.Background(), sharedConfig)
	if err != nil {
		return fmt.Errorf("--shared-config: %w", err)
	}
	if err := checkConfigKind(opts.ConfigFile); err != nil {
		return err
	}
	fg := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(opts.Logs, fg); err != nil {
		return err
	}
	cliflag.PrintFlags(cmd.Flags())
	if opts.InformerName == nil {
		name, err := cache.NewInformerName("kube-scheduler")
		if err != nil {
			return err
		}
		opts.InformerName = name
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-server.SetupSignalHandler()
		cancel()
	}()

	cleanup, err := applyKubeconfigFlag(cmd, opts)
	if err != nil {
		return err
	}
	shared := scheduler.NewShared(sharedCfg)
	ms, collectors := shared.Metrics()
	legacyregistry.MustRegister(ms...)
	legacyregistry.CustomMustRegister(collectors...)
	cc, sched, err := kubescheduler.Setup(ctx, opts, registryOptions(shared)...)
	// Setup has read the configuration; the merged copy is not needed any more.
	cleanup()
	if err != nil {
		return err
	}
	// A standby replica must not act: its job queue would write the
	// statuses and evict the pods the leader's queue decides on. Its
	// informers, which the queue waits for, start only when it leads.
	if cc.LeaderElection != nil && !cc.ComponentConfig.DelayCacheUntilActive {
		klog.InfoS("Setting delayCacheUntilActive: only the leader's job queue may act")
		cc.ComponentConfig.DelayCacheUntilActive = true
	}
	fg.(featuregate.MutableFeatureGate).AddMetrics()
	opts.ComponentGlobalsRegistry.AddMetrics()
	return kubescheduler.Run(ctx, cc, sched)
}

// checkConfigKind refuses a --config file that is not a
// KubeSchedulerConfiguration, saying what to give instead: kube-scheduler
// answers a ConfigMap (what helm template prints of the chart, or kubectl
// get -o yaml) with 'no kind "ConfigMap" is registered'.
func checkConfigKind(path string) error {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	if _, err := yamlfile.Parse(path, data, "a KubeSchedulerConfiguration"); err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var head metav1.TypeMeta
	if err := yaml.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	const instead = "aisched scheduler --print-config writes aisched's"
	switch head.Kind {
	case "KubeSchedulerConfiguration":
		return nil
	case "ConfigMap":
		return fmt.Errorf("--config %s: a ConfigMap (as helm template prints the chart's), not the KubeSchedulerConfiguration in it; %s"+
			", or take the ConfigMap's (kubectl -n aisched-system get configmap aisched-scheduler-config -o jsonpath='{.data.scheduler-config\\.yaml}')"+
			" and give its shared-config.yaml to --shared-config", path, instead)
	case "":
		return fmt.Errorf("--config %s: no kind: want a KubeSchedulerConfiguration; %s", path, instead)
	default:
		return fmt.Errorf("--config %s: a %s: want a KubeSchedulerConfiguration; %s", path, head.Kind, instead)
	}
}

// applyKubeconfigFlag points opts at a copy of the --config file whose
// clientConnection.kubeconfig is the --kubeconfig flag, when both are given
// (scheduler.ConfigWithKubeconfig). The returned function removes the copy.
func applyKubeconfigFlag(cmd *cobra.Command, opts *options.Options) (func(), error) {
	if opts.ConfigFile == "" || !cmd.Flags().Changed("kubeconfig") {
		return func() {}, nil
	}
	kubeconfig, err := cmd.Flags().GetString("kubeconfig")
	if err != nil {
		return func() {}, err
	}
	path, remove, err := scheduler.ConfigWithKubeconfig(opts.ConfigFile, kubeconfig)
	var conflict *scheduler.KubeconfigConflictError
	switch {
	case errors.As(err, &conflict):
		return remove, fmt.Errorf("--kubeconfig %s conflicts with clientConnection.kubeconfig %s in --config %s", conflict.Given, conflict.InFile, conflict.File)
	case err != nil:
		return remove, fmt.Errorf("--config: %w", err)
	}
	opts.ConfigFile = path
	return remove, nil
}

// registryOptions passes aisched's out-of-tree plugins, with the state
// they share, to the upstream command.
func registryOptions(shared *scheduler.Shared) []kubescheduler.Option {
	var opts []kubescheduler.Option
	for name, factory := range scheduler.Registry(shared) {
		opts = append(opts, kubescheduler.WithPlugin(name, factory))
	}
	return opts
}

// addSharedConfigFlag adds --shared-config to fs, set into path, and its
// old name --services-config, deprecated: it still sets path, and pflag
// prints that it is deprecated and names the new flag.
func addSharedConfigFlag(fs *pflag.FlagSet, path *string, usage string) {
	fs.StringVar(path, "shared-config", "", usage)
	fs.StringVar(path, "services-config", "", usage)
	_ = fs.MarkDeprecated("services-config", "use --shared-config")
}
