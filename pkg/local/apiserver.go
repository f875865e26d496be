package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

const (
	// serviceCIDR is the Service cluster IP range; its first address is the
	// kubernetes Service, named in the serving certificate.
	serviceCIDR = "10.96.0.0/12"
	// serviceIssuer is the issuer of service-account tokens.
	serviceIssuer = "https://kubernetes.default.svc.cluster.local"
	// apiserverReadyTimeout bounds the wait for /readyz after the server starts.
	apiserverReadyTimeout = 60 * time.Second
)

// WorkloadAPI is the group version of Kubernetes' native Workload and
// PodGroup (GenericWorkload gate, beta in 1.37): the apiserver serves it only
// with --runtime-config=scheduling.k8s.io/v1beta1=true.
const WorkloadAPI = "scheduling.k8s.io/v1beta1"

var kubernetesServiceIP = net.IPv4(10, 96, 0, 1)

// apiserverConfig is what the embedded kube-apiserver needs from the cluster.
type apiserverConfig struct {
	listener net.Listener
	etcdURL  string
	pki      pki
	// advertise is the address real kubelets and pods reach the apiserver
	// on; nil for loopback only.
	advertise net.IP
	// extraArgs are kube-apiserver flags (--runtime-config=..., ...) applied last.
	extraArgs []string
}

// startAPIServer runs kube-apiserver in this process on cfg.listener. The
// returned channel yields the error Run ended with (nil after a clean
// shutdown) and is closed when the server has stopped.
func startAPIServer(ctx context.Context, cfg apiserverConfig) (<-chan error, error) {
	s := options.NewServerRunOptions()
	// A registry per server instead of the process-wide default, so that
	// several clusters can run in one test binary (as upstream's test server does).
	registry := basecompatibility.NewComponentGlobalsRegistry()
	if err := registry.Register(basecompatibility.DefaultKubeComponent, compatibility.DefaultBuildEffectiveVersion(), utilfeature.DefaultMutableFeatureGate.DeepCopy()); err != nil {
		return nil, err
	}
	s.GenericServerRunOptions.ComponentGlobalsRegistry = registry

	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	port := cfg.listener.Addr().(*net.TCPAddr).Port
	args := []string{
		"--etcd-servers=" + cfg.etcdURL,
		"--etcd-cafile=" + cfg.pki.EtcdCACert(),
		"--etcd-certfile=" + cfg.pki.EtcdClientCert(),
		"--etcd-keyfile=" + cfg.pki.EtcdClientKey(),
		// Every caller shows who it is: a certificate of the cluster CA
		// or a token.
		"--anonymous-auth=false",
		fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file=" + cfg.pki.ServingCert(),
		"--tls-private-key-file=" + cfg.pki.ServingKey(),
		"--client-ca-file=" + cfg.pki.CACert(),
		// The admin's token, for the console's sign-in.
		"--token-auth-file=" + cfg.pki.TokenFile(),
		"--service-account-issuer=" + serviceIssuer,
		"--service-account-key-file=" + cfg.pki.ServiceAccountKey(),
		"--service-account-signing-key-file=" + cfg.pki.ServiceAccountKey(),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--profiling=false",
	}
	if cfg.advertise == nil {
		args = append(args, "--bind-address=127.0.0.1",
			// The advertise address is loopback, which the lease reconciler
			// refuses to publish as the kubernetes Service endpoint.
			"--endpoint-reconciler-type=none")
	} else {
		args = append(args, "--bind-address="+cfg.advertise.String(), "--advertise-address="+cfg.advertise.String(),
			"--endpoint-reconciler-type=lease",
			// The apiserver runs on no node, so it has no route to Service
			// IPs (kube-proxy's rules live on the nodes): webhooks and
			// aggregated APIs are reached at their endpoints' pod IPs.
			"--enable-aggregator-routing=true",
			// Real kubelets report the names they were given, which no DNS
			// resolves here; logs, exec and port-forward go to their IPs.
			"--kubelet-preferred-address-types=InternalIP,Hostname")
	}
	if err := fs.Parse(append(args, cfg.extraArgs...)); err != nil {
		return nil, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	s.SecureServing.Listener = cfg.listener
	if err := registry.Set(); err != nil {
		return nil, err
	}

	completed, err := s.Complete(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("kube-apiserver options: %w", utilerrors.NewAggregate(errs))
	}
	config, err := app.NewConfig(completed)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver config: %w", err)
	}
	cc, err := config.Complete()
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver config: %w", err)
	}
	server, err := app.CreateServerChain(cc)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	prepared, err := server.PrepareRun()
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		defer close(done)
		done <- prepared.Run(ctx)
	}()
	return done, nil
}

// waitReady polls /readyz until the apiserver reports ready, the server
// stops, or the timeout passes.
func waitReady(ctx context.Context, cfg *rest.Config, stopped <-chan error) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, apiserverReadyTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-stopped:
			if err == nil {
				err = errors.New("stopped")
			}
			return false, fmt.Errorf("kube-apiserver: %w", err)
		default:
		}
		var status int
		body, _ := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status).Raw()
		last = string(body)
		return status == http.StatusOK, nil
	})
	if err != nil && last != "" {
		return fmt.Errorf("%w; last /readyz answer: %s", err, last)
	}
	return err
}
