package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/aisched/aisched/pkg/gateway"
)

type gatewayOptions struct {
	kubeconfig     string
	namespace      string
	listen         string
	adminListen    string
	trustedProxies []string
	verbosity      int
}

func newGatewayCommand() *cobra.Command {
	o := gatewayOptions{listen: ":8480", adminListen: ":9090", namespace: platformNamespace()}
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Serve the AI services of the cluster, enforcing their security controls",
		Long: `Serve every AIService of the cluster at /<namespace>/<service>/<path>,
proxied to its ready pods, with its security controls enforced in this
order: caller IP lists, API key and consumer lists, request control, kill
switch, flow control, circuit breaker. API keys are checked against the
digests the platform controller publishes in each AIService's status; the
gateway reads no Secret but the controller's pepper in --namespace.
Changes to an AIService, its API keys or its endpoints apply within a
second, without restart. /metrics,
/healthz and /readyz are served on --admin-bind-address. It runs as a
Deployment behind a Service (the Helm chart charts/aisched); replicas share nothing.

  aisched gateway --kubeconfig KUBECONFIG --bind-address :8480`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return runGateway(o) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster (default: the in-cluster configuration of the pod)")
	fs.StringVar(&o.namespace, "namespace", o.namespace, "namespace of the platform controller, where it keeps the API-key pepper (default $POD_NAMESPACE, else aisched-system)")
	fs.StringVar(&o.listen, "bind-address", o.listen, "address of the traffic")
	fs.StringVar(&o.adminListen, "admin-bind-address", o.adminListen, `address of /metrics, /healthz and /readyz ("0": none)`)
	fs.StringSliceVar(&o.trustedProxies, "trusted-proxies", nil, "CIDRs of the proxies in front of the gateway, whose X-Forwarded-For is believed, comma-separated (default: none; the caller is the peer)")
	fs.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity (klog level)")
	return cmd
}

func runGateway(o gatewayOptions) error {
	var trusted []netip.Prefix
	for _, s := range o.trustedProxies {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("--trusted-proxies: %q is not a CIDR", s)
		}
		trusted = append(trusted, p.Masked())
	}
	if err := setupKlog(os.Stderr, o.verbosity); err != nil {
		return err
	}
	defer klog.Flush()
	cfg, err := kubeRESTConfig(o.kubeconfig, "aisched-gateway")
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--bind-address: %w", err)
	}
	opts := gateway.RunOptions{Options: gateway.Options{TrustedProxies: trusted}, Listener: l, Namespace: o.namespace}
	if o.adminListen != "0" {
		if opts.AdminListener, err = net.Listen("tcp", o.adminListen); err != nil {
			return fmt.Errorf("--admin-bind-address: %w", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	klog.InfoS("Starting the gateway", "address", l.Addr().String(), "admin", o.adminListen, "trustedProxies", o.trustedProxies)
	started := make(chan struct{})
	go func() {
		select {
		case <-started:
			klog.InfoS("Gateway serving: routes loaded")
		case <-ctx.Done():
		}
	}()
	if err := gateway.Run(ctx, cfg, opts, started); err != nil {
		return err
	}
	klog.InfoS("Stopped the gateway")
	return nil
}
