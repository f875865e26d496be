package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/console"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/sim"
	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/whatif"
	"github.com/aisched/aisched/scenarios"
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
	cfg, err := consoleAPIServer(o)
	if err != nil {
		return err
	}
	opts := console.Options{
		APIServer: cfg, GatewayURL: o.gatewayURL, SessionTTL: o.sessionTTL,
		SecureCookies: o.secure || o.tlsCert != "", TrustAuthorizationHeader: o.trustHeader,
	}
	if o.simulations {
		sched, err := scheduler.ReadConfig(o.schedulerConfig)
		if err != nil {
			return fmt.Errorf("--scheduler-config: %w", err)
		}
		opts.Simulator = Simulations{SchedulerConfig: sched, WhatIfHorizon: o.whatifHorizon}
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

// Simulations runs the console's simulations page: the embedded seed
// scenarios on the fast engine, and whatif on a snapshot read as the user.
type Simulations struct {
	// SchedulerConfig is the cluster's scheduler configuration, which
	// whatif simulates (scheduler.ReadConfig).
	SchedulerConfig *config.KubeSchedulerConfiguration
	// WhatIfHorizon is how far whatif looks ahead.
	WhatIfHorizon time.Duration
}

var _ console.Simulator = Simulations{}

// Scenarios lists the embedded seed scenarios.
func (Simulations) Scenarios() []console.Scenario {
	var out []console.Scenario
	files, _ := fs.Glob(scenarios.Seeds, "*.yaml")
	for _, f := range files {
		s, err := loadSeed(f)
		if err != nil {
			klog.ErrorS(err, "console: a shipped scenario does not load", "file", f)
			continue
		}
		out = append(out, console.Scenario{Name: s.Name, Description: s.Description})
	}
	return out
}

func loadSeed(file string) (*scenario.Scenario, error) {
	data, err := scenarios.Seeds.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return scenario.Parse(file, data)
}

// RunScenario runs a seed scenario by name.
func (Simulations) RunScenario(ctx context.Context, name string) (*console.SimReport, error) {
	files, _ := fs.Glob(scenarios.Seeds, "*.yaml")
	for _, f := range files {
		s, err := loadSeed(f)
		if err != nil || s.Name != name {
			continue
		}
		rep, err := sim.Run(ctx, s, sim.Options{Parallel: 1})
		if err != nil {
			return nil, err
		}
		rows, err := rep.Rows()
		if err != nil {
			return nil, err
		}
		var svg bytes.Buffer
		if err := rep.WriteSVG(&svg); err != nil {
			return nil, err
		}
		return &console.SimReport{Title: s.Name, Description: s.Description, Policies: rep.PolicyNames(), Rows: rows, SVG: svg.String()}, nil
	}
	return nil, fmt.Errorf("scenario %.64q: not a shipped scenario", name)
}

// WhatIf answers when a job would run, on a snapshot read with the user's
// clients, with the cluster's scheduler configuration.
func (w Simulations) WhatIf(ctx context.Context, kube kubernetes.Interface, ai versioned.Interface, manifest []byte, namespace string) (*console.SimReport, error) {
	job, err := whatif.ParseJob(bytes.NewReader(manifest), namespace)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	snap, err := whatif.Take(ctx, kube, ai)
	if err != nil {
		return nil, err
	}
	ans, err := whatif.Run(ctx, snap, job, whatif.Options{SchedulerConfig: w.SchedulerConfig, Services: aischedconfig.DefaultServices(), Horizon: w.WhatIfHorizon})
	if err != nil {
		return nil, err
	}
	var text strings.Builder
	if err := ans.WriteText(&text, snap.Taken); err != nil {
		return nil, err
	}
	return &console.SimReport{Title: "whatif", Text: text.String()}, nil
}

// tlsListener serves TLS on l with the certificate files, read again as
// they change (certwatcher), until ctx ends.
func tlsListener(ctx context.Context, l net.Listener, certFile, keyFile string) (net.Listener, error) {
	w, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file: %w", err)
	}
	go func() {
		if err := w.Start(ctx); err != nil {
			klog.ErrorS(err, "Watching the console's certificate", "file", certFile)
		}
	}()
	return tls.NewListener(l, &tls.Config{GetCertificate: w.GetCertificate, MinVersion: tls.VersionTLS12}), nil
}
