package app

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/plugin"
	"k8s.io/kubectl/pkg/cmd/util"

	"github.com/aisched/aisched/pkg/local"
)

// newKubectlCommand is kubectl compiled in, of the embedded apiserver's
// version, so that `aisched up` needs no other binary (k3s does the same).
// Without KUBECONFIG or --kubeconfig it talks to the cluster of `aisched up`
// when that has written its kubeconfig in the default data directory.
func newKubectlCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kubectl",
		Short: "Run kubectl, compiled in (default: the cluster of aisched up)",
		Long: `Run kubectl, of the same version as the embedded apiserver. Every kubectl
command and flag works. Without KUBECONFIG or --kubeconfig it uses the
kubeconfig of aisched up in the default data directory, when there is one.

  aisched kubectl get nodes`,
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			if os.Getenv("KUBECONFIG") == "" && !hasFlag(args, "kubeconfig") {
				if path := filepath.Join(local.DefaultDataDir(), "kubeconfig"); fileExists(path) {
					args = append([]string{"--kubeconfig=" + path}, args...)
				}
			}
			argv := append([]string{"kubectl"}, args...)
			_, _ = logs.GlogSetter(kubectlcmd.GetLogVerbosity(argv))
			streams := genericiooptions.IOStreams{In: c.InOrStdin(), Out: c.OutOrStdout(), ErrOut: c.ErrOrStderr()}
			kubectl := kubectlcmd.NewDefaultKubectlCommandWithArgs(kubectlcmd.KubectlOptions{
				PluginHandler: kubectlcmd.NewDefaultPluginHandler(plugin.ValidPluginFilenamePrefixes),
				Arguments:     argv,
				ConfigFlags:   genericclioptions.NewConfigFlags(true).WithDiscoveryBurst(300).WithDiscoveryQPS(50).WithWarningPrinter(streams),
				IOStreams:     streams,
			})
			kubectl.SetArgs(args)
			if err := cli.RunNoErrOutput(kubectl); err != nil {
				// kubectl's own error printing and exit codes.
				util.CheckErr(err)
			}
			return nil
		},
	}
}

// hasFlag reports whether args set --name (or --name=...).
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
