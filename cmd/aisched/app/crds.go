package app

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/aisched/aisched/charts/aisched/crds"
)

func newCRDsCommand() *cobra.Command {
	var kubeconfig string
	var printOnly bool
	cmd := &cobra.Command{
		Use:   "crds",
		Short: "Install or upgrade aisched's CustomResourceDefinitions in a cluster",
		Long: `Create aisched's CustomResourceDefinitions in the cluster, or replace those
of an older release, and wait until the apiserver serves them. Helm installs
the chart's CRDs once and never upgrades them; the chart runs this command
in a pre-upgrade hook (crds.upgrade). Objects already stored are kept.

  aisched crds --kubeconfig KUBECONFIG
  aisched crds --print | kubectl apply --server-side -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printOnly {
				files, err := crds.Files()
				if err != nil {
					return err
				}
				for _, data := range files {
					if _, err := fmt.Fprintf(cmd.OutOrStdout(), "---\n%s", data); err != nil {
						return err
					}
				}
				return nil
			}
			cfg, err := kubeRESTConfig(kubeconfig, "aisched-crds")
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := crds.Install(ctx, cfg); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "aisched's CRDs are installed and served")
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster (default: the in-cluster configuration of the pod)")
	cmd.Flags().BoolVar(&printOnly, "print", false, "print the CRDs as YAML instead of installing them")
	return cmd
}
