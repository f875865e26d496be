package platform

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/aisched/aisched/pkg/platform/keys"
	"github.com/aisched/aisched/pkg/platform/refs"
	"github.com/aisched/aisched/pkg/webhook/schedulername"
)

// RunOptions configure a running controller.
type RunOptions struct {
	Options
	// LeaderElectionNamespace, when set, elects one active controller
	// among the replicas with the Lease aisched-controller there.
	LeaderElectionNamespace string
	// Namespace is the platform's: the API-key pepper (keys.PepperSecret)
	// is kept there, made when Options.Pepper is nil.
	Namespace string
	// MetricsAddr serves controller-runtime's /metrics; "0" or "": none.
	MetricsAddr string
	// HealthAddr serves /healthz and /readyz; "0" or "": none.
	HealthAddr string
	// WebhookListener takes the admission webhook's requests (every
	// replica serves them, leader or not); nil: no webhook.
	WebhookListener net.Listener
	// GetCertificate returns the webhook's serving certificate.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// AssignScheduler serves schedulername's webhook beside the
	// platform's: new pods it is called for get SchedulerName.
	AssignScheduler bool
	// ShutdownTimeout bounds the wait for reconcilers and the webhook to
	// return at the end; 0: controller-runtime's 30s.
	ShutdownTimeout time.Duration
}

// Run runs the platform's controllers, and its webhook, against the
// cluster of cfg until ctx ends. started is closed once the caches are
// synced and the webhook serves.
func Run(ctx context.Context, cfg *rest.Config, opts RunOptions, started chan<- struct{}) error {
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	addr := func(a string) string {
		if a == "" {
			return "0"
		}
		return a
	}
	mgr, err := ctrl.NewManager(rest.AddUserAgent(rest.CopyConfig(cfg), "aisched-controller"), ctrl.Options{
		Scheme:                        scheme,
		Logger:                        klog.FromContext(ctx),
		Cache:                         refs.CacheOptions(),
		Metrics:                       metricsserver.Options{BindAddress: addr(opts.MetricsAddr)},
		HealthProbeBindAddress:        addr(opts.HealthAddr),
		LeaderElection:                opts.LeaderElectionNamespace != "",
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionID:              "aisched-controller",
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       gracefulShutdown(opts.ShutdownTimeout),
		// Controller names are checked process-wide; tests run clusters side by side.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	if opts.Pepper == nil {
		client, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "aisched-controller"))
		if err != nil {
			return err
		}
		if opts.Pepper, err = keys.EnsurePepper(ctx, client, opts.Namespace); err != nil {
			return err
		}
	}
	if err := Setup(ctx, mgr, opts.Options); err != nil {
		return err
	}
	if opts.WebhookListener != nil {
		handlers := WebhookHandlers(scheme, mgr.GetAPIReader())
		if opts.AssignScheduler {
			maps.Copy(handlers, schedulername.Handlers(scheme, opts.SchedulerName))
		}
		if err := mgr.Add(webhookRunnable(func(ctx context.Context) error {
			return ServeWebhooks(ctx, opts.WebhookListener, opts.GetCertificate, handlers)
		})); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(ctx) }()
	select {
	case err := <-errc:
		return err
	case <-waitSynced(ctx, mgr):
	}
	close(started)
	return <-errc
}

// gracefulShutdown is the manager's option for d; nil keeps its default.
func gracefulShutdown(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

func waitSynced(ctx context.Context, mgr manager.Manager) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			close(done)
		}
	}()
	return done
}

// webhookRunnable serves on every replica: the apiserver calls any of them.
type webhookRunnable func(context.Context) error

func (f webhookRunnable) Start(ctx context.Context) error { return f(ctx) }
func (webhookRunnable) NeedLeaderElection() bool          { return false }
