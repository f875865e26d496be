package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/platform/keys"
	"github.com/aisched/aisched/pkg/platform/refs"
)

const (
	// defaultShutdownTimeout bounds the wait for requests in flight at
	// shutdown.
	defaultShutdownTimeout = 10 * time.Second
	// loadTimeout bounds the wait for the first routes before serving.
	loadTimeout = 30 * time.Second
)

// RunOptions configure a running gateway.
type RunOptions struct {
	Options
	// Listener takes the traffic.
	Listener net.Listener
	// AdminListener serves /metrics, /healthz and /readyz; nil: none.
	AdminListener net.Listener
	// ShutdownTimeout bounds the wait for requests in flight at the end;
	// 0: 10s.
	ShutdownTimeout time.Duration
	// Namespace is the platform's: where the controller keeps the API-key
	// pepper (keys.PepperSecret), read when Options.Pepper is nil.
	Namespace string
}

// pepperPoll is how often the gateway looks for the pepper the controller
// makes.
const pepperPoll = 500 * time.Millisecond

// Run runs a gateway against the cluster of cfg until ctx ends. The admin
// listener serves at once (/readyz 503); the traffic listener once every
// AIService has its route. started is closed then. At the end it stops
// taking requests and waits for those in flight, up to opts.ShutdownTimeout.
func Run(ctx context.Context, cfg *rest.Config, opts RunOptions, started chan<- struct{}) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(rest.AddUserAgent(rest.CopyConfig(cfg), "aisched-gateway"), ctrl.Options{
		Scheme:                 scheme,
		Logger:                 klog.FromContext(ctx),
		Cache:                  refs.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"}, // the gateway serves its own
		HealthProbeBindAddress: "0",
		// Controller names are checked process-wide; tests run clusters side by side.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	if opts.Pepper == nil {
		client, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "aisched-gateway"))
		if err != nil {
			return err
		}
		if opts.Pepper, err = keys.WaitPepper(ctx, client, opts.Namespace, pepperPoll); err != nil {
			return err
		}
	}
	g := New(opts.Options)
	defer g.Close()
	if err := (&RouteReconciler{Client: mgr.GetClient(), Gateway: g}).SetupWithManager(ctx, mgr); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	serve := func(s *http.Server, l net.Listener) {
		if err := s.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("serve %s: %w", l.Addr(), err)
		}
	}
	var servers []*http.Server
	if opts.AdminListener != nil {
		admin := newServer(g.AdminHandler())
		servers = append(servers, admin)
		go serve(admin, opts.AdminListener)
	}
	go func() { errc <- mgr.Start(ctx) }()
	stop := func(runErr error) error {
		grace := opts.ShutdownTimeout
		if grace == 0 {
			grace = defaultShutdownTimeout
		}
		shutdown, done := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer done()
		for _, s := range servers {
			runErr = errors.Join(runErr, s.Shutdown(shutdown))
		}
		cancel()
		return runErr
	}
	if err := waitRoutes(ctx, mgr.GetCache(), mgr.GetClient(), g); err != nil {
		return stop(err)
	}
	g.SetReady()
	traffic := newServer(g)
	servers = append(servers, traffic)
	go serve(traffic, opts.Listener)
	close(started)
	select {
	case <-ctx.Done():
		return stop(nil)
	case err := <-errc:
		return stop(err)
	}
}

// waitRoutes waits for the caches, then for a route of every AIService, so
// that the gateway does not answer 404 for a service it has not read yet.
func waitRoutes(ctx context.Context, cache interface {
	WaitForCacheSync(context.Context) bool
}, c client.Reader, g *Gateway) error {
	if !cache.WaitForCacheSync(ctx) {
		return errors.New("gateway: caches did not sync")
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, loadTimeout, true, func(ctx context.Context) (bool, error) {
		var list v1alpha1.AIServiceList
		if err := c.List(ctx, &list); err != nil {
			return false, err
		}
		for i := range list.Items {
			if _, ok := g.routes.Load(list.Items[i].Namespace + "/" + list.Items[i].Name); !ok {
				return false, nil
			}
		}
		return true, nil
	})
}

// newServer is an HTTP server with the timeouts a public listener needs.
// There is no write timeout: each route bounds its own requests, and
// answers may stream.
func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
	}
}
