package local

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/aisched/aisched/pkg/controller/platform"
	"github.com/aisched/aisched/pkg/gateway"
	"github.com/aisched/aisched/pkg/local/modelserver"
	"github.com/aisched/aisched/pkg/scheduler"
)

// DefaultGatewayAddr is where `aisched up` serves the gateway.
const DefaultGatewayAddr = "127.0.0.1:8480"

// platformShutdownTimeout bounds the platform components' shutdown: the
// gateway's wait for requests in flight and the controller manager's for
// its reconcilers.
const platformShutdownTimeout = 4 * time.Second

// PlatformOptions configure the service platform of a local cluster.
type PlatformOptions struct {
	// GatewayAddr is the gateway's address; default 127.0.0.1:0 (a free
	// port). Its admin endpoints (/metrics, /healthz) take the next free
	// port.
	GatewayAddr string
}

// platformComponents are the service platform in-process: the controllers
// and their admission webhook, the gateway, and the demo model runtime
// that the simulated kubelets start pods of the demo image with.
type platformComponents struct {
	runtime      *modelserver.Runtime
	gateway      net.Listener
	gatewayAdmin net.Listener
	webhook      net.Listener
	webhookCert  tls.Certificate
	caBundle     []byte
}

// listenPlatform opens the platform's listeners and makes the webhook's
// serving certificate, before any component starts.
func listenPlatform(opts PlatformOptions, p pki) (_ *platformComponents, err error) {
	pc := &platformComponents{runtime: modelserver.NewRuntime()}
	defer func() {
		if err != nil {
			pc.close()
		}
	}()
	addr := opts.GatewayAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if pc.gateway, err = net.Listen("tcp", addr); err != nil {
		return nil, &ListenError{Listener: GatewayListener, Addr: addr, InUse: errors.Is(err, syscall.EADDRINUSE), Err: err}
	}
	host, _, _ := net.SplitHostPort(pc.gateway.Addr().String())
	if pc.gatewayAdmin, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
		return nil, fmt.Errorf("gateway admin listener: %w", err)
	}
	if pc.webhook, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("webhook listener: %w", err)
	}
	if err := p.ensureWebhookCert(); err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	if pc.webhookCert, err = tls.LoadX509KeyPair(p.WebhookCert(), p.WebhookKey()); err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	if pc.caBundle, err = os.ReadFile(p.CACert()); err != nil {
		return nil, err
	}
	return pc, nil
}

func (pc *platformComponents) close() {
	for _, l := range []net.Listener{pc.gateway, pc.gatewayAdmin, pc.webhook} {
		if l != nil {
			l.Close()
		}
	}
	pc.runtime.Close()
}

// components are the controller (with its webhook) and the gateway, as
// two components like the two processes of a real cluster.
func (pc *platformComponents) components(cfg *rest.Config) []*component {
	gatewayURL := "http://" + pc.gateway.Addr().String()
	return []*component{
		{name: "platform-controller", run: func(ctx context.Context, started chan<- struct{}) error {
			return platform.Run(ctx, cfg, platform.RunOptions{
				Options:         platform.Options{GatewayURL: gatewayURL, SchedulerName: scheduler.AischedProfile},
				Namespace:       metav1.NamespaceSystem,
				WebhookListener: pc.webhook,
				GetCertificate:  func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pc.webhookCert, nil },
				ShutdownTimeout: platformShutdownTimeout,
			}, started)
		}},
		{name: "gateway", run: func(ctx context.Context, started chan<- struct{}) error {
			return gateway.Run(ctx, cfg, gateway.RunOptions{
				Options:         gateway.Options{Dial: pc.runtime.DialContext},
				Namespace:       metav1.NamespaceSystem,
				Listener:        pc.gateway,
				AdminListener:   pc.gatewayAdmin,
				ShutdownTimeout: platformShutdownTimeout,
			}, started)
		}},
	}
}

// registerWebhook points the platform's ValidatingWebhookConfiguration at
// the in-process webhook (its port changes with every start).
func (pc *platformComponents) registerWebhook(ctx context.Context, client kubernetes.Interface) error {
	url := "https://" + pc.webhook.Addr().String()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: platform.WebhookConfigurationName},
		Webhooks: platform.ValidatingWebhooks(func(path string) admissionregistrationv1.WebhookClientConfig {
			u := url + path
			return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: pc.caBundle}
		}),
	}
	api := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	old, err := api.Get(ctx, cfg.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, cfg, metav1.CreateOptions{})
	case err == nil:
		cfg.ResourceVersion = old.ResourceVersion
		_, err = api.Update(ctx, cfg, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("webhook configuration: %w", err)
	}
	return nil
}

// GatewayURL is the gateway's base URL, empty when the platform is off.
func (c *Cluster) GatewayURL() string {
	if c.platform == nil {
		return ""
	}
	return "http://" + c.platform.gateway.Addr().String()
}

// GatewayAdminURL serves the gateway's /metrics, /healthz and /readyz.
func (c *Cluster) GatewayAdminURL() string {
	if c.platform == nil {
		return ""
	}
	return "http://" + c.platform.gatewayAdmin.Addr().String()
}

// ensureWebhookCert makes the serving certificate of the in-process
// webhook, for 127.0.0.1, signed by the cluster CA.
func (p pki) ensureWebhookCert() error {
	caKey, caCert, err := p.loadOrCreateCA()
	if err != nil {
		return err
	}
	return p.ensureLeaf(p.WebhookCert(), p.WebhookKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "aisched-platform-webhook"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, caKey)
}
