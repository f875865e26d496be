package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/console"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/util/certs"
)

// inClusterCAFile is where the chart mounts the kube-root-ca.crt ConfigMap:
// the console's pod has no service-account token, so the usual path is
// not there.
const inClusterCAFile = "/etc/aisched/apiserver-ca/ca.crt"

type consoleOptions struct {
	listen          string
	kubeconfig      string
	apiserver       string
	caFile          string
	gatewayURL      string
	tlsCert         string
	tlsKey          string
	secure          bool
	trustHeader     bool
	sessionTTL      time.Duration
	simulations     bool
	schedulerConfig string
	sharedConfig    string
	verbosity       int
	whatifHorizon   time.Duration
}

func newConsoleCommand() *cobra.Command {
	o := consoleOptions{listen: ":8490", caFile: inClusterCAFile, sessionTTL: 8 * time.Hour, simulations: true, whatifHorizon: 24 * time.Hour}
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console: GPU map, waiting work, the AI service platform, simulations",
		Long: `Serve aisched's web console. It holds no rights of its own: users sign in
with a bearer token the apiserver accepts (an OIDC ID token, or one from
kubectl create token), or an authenticating proxy in front passes their
Authorization header (--trust-authorization-header), and every call the
console makes carries that token, so Kubernetes RBAC decides what each
person sees and changes. Only the apiserver's address and CA are taken
from --kubeconfig; its credentials are ignored.

  aisched console --kubeconfig ~/.kube/config --bind-address 127.0.0.1:8490`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return runConsole(o) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.listen, "bind-address", o.listen, "address of the console")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig whose cluster (address and CA) the console calls; its credentials are not used (default: --apiserver, else the pod's cluster)")
	fs.StringVar(&o.apiserver, "apiserver", "", "the apiserver's URL (default https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)")
	fs.StringVar(&o.caFile, "apiserver-ca-file", o.caFile, "CA bundle of the apiserver's serving certificate, with --apiserver or in a pod")
	fs.StringVar(&o.gatewayURL, "gateway-url", "", "base URL of aisched's gateway for test requests, e.g. http://aisched-gateway.aisched-system:8480 (empty: off)")
	fs.StringVar(&o.tlsCert, "tls-cert-file", "", "serve HTTPS with this certificate (with --tls-private-key-file)")
	fs.StringVar(&o.tlsKey, "tls-private-key-file", "", "key of --tls-cert-file")
	fs.BoolVar(&o.secure, "secure-cookies", false, "mark the session cookie Secure (set it when a TLS proxy is in front; on by itself with --tls-cert-file)")
	fs.BoolVar(&o.trustHeader, "trust-authorization-header", false, "take a request's own Authorization: Bearer header as the user (an authenticating proxy in front, or scripts)")
	fs.DurationVar(&o.sessionTTL, "session-ttl", o.sessionTTL, "how long a sign-in lasts (at most 168h)")
	fs.BoolVar(&o.simulations, "simulations", o.simulations, "offer the simulations page (scenarios and whatif run in the console's process)")
	fs.StringVar(&o.schedulerConfig, "scheduler-config", "", "the cluster's KubeSchedulerConfiguration, which whatif simulates (default aisched up's)")
	addSharedConfigFlag(fs, &o.sharedConfig, "the cluster's SharedConfiguration file, which whatif simulates (default: defaults)")
	fs.DurationVar(&o.whatifHorizon, "whatif-horizon", o.whatifHorizon, "how far whatif looks ahead (at most 8760h)")
	fs.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity (klog level)")
	return cmd
}

func runConsole(o consoleOptions) error {
	if o.sessionTTL <= 0 || o.sessionTTL > 7*24*time.Hour {
		return fmt.Errorf("--session-ttl %s: want more than 0 and at most 168h", o.sessionTTL)
	}
	if o.whatifHorizon <= 0 || o.whatifHorizon > 365*24*time.Hour {
		return fmt.Errorf("--whatif-horizon %s: want more than 0 and at most 8760h", o.whatifHorizon)
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return fmt.Errorf("--tls-cert-file and --tls-private-key-file go together")
	}
	if err := setupKlog(os.Stderr, o.verbosity); err != nil {
		return err
	}
	defer klog.Flush()
	var sims *console.Simulations
	if o.simulations {
		sched, err := scheduler.ReadConfig(o.schedulerConfig)
		if err != nil {
			return fmt.Errorf("--scheduler-config: %w", err)
		}
		shared, err := aischedconfig.ReadShared(klog.Background(), o.sharedConfig)
		if err != nil {
			return fmt.Errorf("--shared-config: %w", err)
		}
		sims = &console.Simulations{SchedulerConfig: sched, SharedConfig: shared, WhatIfHorizon: o.whatifHorizon}
	}
	cfg, err := consoleAPIServer(o)
	if err != nil {
		return err
	}
	opts := console.Options{
		APIServer: cfg, GatewayURL: o.gatewayURL, SessionTTL: o.sessionTTL,
		SecureCookies: o.secure || o.tlsCert != "", TrustAuthorizationHeader: o.trustHeader,
		Simulations: sims,
	}
	srv, err := console.New(opts)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--bind-address: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.tlsCert != "" {
		if l, err = tlsListener(ctx, l, o.tlsCert, o.tlsKey); err != nil {
			return err
		}
	}
	klog.InfoS("Serving the console", "address", l.Addr().String(), "apiserver", cfg.Host)
	return srv.Serve(ctx, l)
}

// consoleAPIServer is the apiserver's address and CA, without credentials.
func consoleAPIServer(o consoleOptions) (*rest.Config, error) {
	if o.kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return rest.AnonymousClientConfig(cfg), nil
	}
	host := o.apiserver
	if host == "" {
		h, p := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if h == "" || p == "" {
			return nil, fmt.Errorf("give --kubeconfig or --apiserver (not in a pod)")
		}
		host = "https://" + net.JoinHostPort(h, p)
	}
	if u, err := url.Parse(host); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("--apiserver %q: want https://host[:port]", host)
	}
	if _, err := os.Stat(o.caFile); err != nil {
		return nil, fmt.Errorf("--apiserver-ca-file: %w", err)
	}
	return &rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{CAFile: o.caFile}}, nil
}

// tlsListener serves TLS on l with the certificate files, read again as
// they change (certs.Watch), until ctx ends.
func tlsListener(ctx context.Context, l net.Listener, certFile, keyFile string) (net.Listener, error) {
	get, err := certs.Watch(ctx, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file: %w", err)
	}
	return tls.NewListener(l, &tls.Config{GetCertificate: get, MinVersion: tls.VersionTLS12}), nil
}
