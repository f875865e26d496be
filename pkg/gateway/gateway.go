package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
)

// Options configure a Gateway.
type Options struct {
	// TrustedProxies are the addresses of proxies in front of the gateway
	// (a load balancer): only for a request from one of them is the caller
	// taken from X-Forwarded-For, as the right-most address that is not a
	// trusted proxy. Empty: the caller is the peer address, and
	// X-Forwarded-For is never believed.
	TrustedProxies []netip.Prefix
	// Dial connects to an endpoint; default a net.Dialer. `aisched up`
	// dials simulated pods through the demo model runtime.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Pepper checks the API keys the services' statuses publish
	// (package keys); Run reads it from the platform's namespace.
	Pepper []byte
}

// Gateway routes requests to AIServices and enforces their controls. Its
// routes are set by RouteReconciler. It is an http.Handler for the
// traffic; AdminHandler serves its metrics and health.
type Gateway struct {
	opts      Options
	routes    sync.Map // "namespace/name" -> *route
	metrics   *metrics
	transport *http.Transport
	proxy     *httputil.ReverseProxy
	ready     atomic.Bool
}

// New returns a gateway with no routes.
func New(opts Options) *Gateway {
	g := &Gateway{opts: opts, metrics: newMetrics()}
	dial := opts.Dial
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	g.transport = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			timeout := DefaultConnectTimeout
			if t, ok := ctx.Value(targetKey{}).(*target); ok {
				timeout = t.connectTimeout
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return dial(ctx, network, addr)
		},
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Bodies pass through as the service made them.
		DisableCompression: true,
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:      rewrite,
		Transport:    g.transport,
		ErrorHandler: proxyError,
		BufferPool:   &bufferPool{},
		ErrorLog:     nil,
	}
	return g
}

// SetReady marks the gateway ready (its routes are loaded): /readyz
// answers 200 from then on.
func (g *Gateway) SetReady() { g.ready.Store(true) }

// Close closes the idle connections to endpoints.
func (g *Gateway) Close() { g.transport.CloseIdleConnections() }

// AdminHandler serves /metrics, /healthz and /readyz.
func (g *Gateway) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.metrics.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !g.ready.Load() {
			http.Error(w, "routes not loaded yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// Apply installs the route of an AIService, with the API keys its status
// publishes and its ready endpoints ("ip:port"), replacing the service's
// route if it had one. RouteReconciler calls it on every change; requests
// in flight finish with the route they started with.
func (g *Gateway) Apply(svc *v1alpha1.AIService, endpoints []string) {
	g.set(compile(svc, g.opts.Pepper, endpoints))
}

// Delete drops the route of an AIService.
func (g *Gateway) Delete(namespace, name string) {
	if v, ok := g.routes.LoadAndDelete(namespace + "/" + name); ok {
		v.(*route).metrics.delete()
	}
}

func (g *Gateway) set(cfg *routeConfig) {
	key := cfg.namespace + "/" + cfg.name
	v, ok := g.routes.Load(key)
	if !ok {
		v, _ = g.routes.LoadOrStore(key, &route{metrics: g.metrics.forRoute(cfg.namespace, cfg.name)})
	}
	v.(*route).update(cfg)
}

// ServeHTTP routes /<namespace>/<service>/<rest>.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ns, name, rest, ok := splitPath(r.URL.Path)
	var rt *route
	if ok {
		if v, found := g.routes.Load(ns + "/" + name); found {
			rt = v.(*route)
		}
	}
	if rt == nil {
		reject(http.StatusNotFound, ReasonNoSuchService,
			fmt.Sprintf("no AIService at %q: the gateway serves /<namespace>/<service>/<path>", r.URL.Path)).write(w)
		return
	}
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	// Deferred: an answer that breaks off mid-body panics
	// (http.ErrAbortHandler), and it was a request too.
	defer func() { rt.metrics.request(rec.code, time.Since(start).Seconds()) }()
	if rej := g.serve(rec, r, rt, rest, start); rej != nil {
		rt.metrics.rejected(rej.reason)
		if !rec.wrote {
			rej.write(rec)
		}
	}
}

// splitPath splits /<namespace>/<service>/<rest> and cleans rest, so that
// dot segments cannot climb above the service's API path.
func splitPath(p string) (ns, name, rest string, ok bool) {
	p, found := strings.CutPrefix(p, "/")
	if !found {
		return "", "", "", false
	}
	ns, p, found = strings.Cut(p, "/")
	if !found || ns == "" {
		return "", "", "", false
	}
	// rest keeps its leading slash: path.Clean returns a clean path as it
	// is, without making a new string.
	name, rest = p, "/"
	if i := strings.IndexByte(p, '/'); i >= 0 {
		name, rest = p[:i], p[i:]
	}
	if name == "" {
		return "", "", "", false
	}
	trailing := strings.HasSuffix(rest, "/")
	rest = path.Clean(rest)
	if trailing && rest != "/" {
		rest += "/"
	}
	return ns, name, rest, true
}

// serve runs the controls in order and proxies the request; it returns the
// rejection to answer with, if any.
func (g *Gateway) serve(w *recorder, r *http.Request, rt *route, rest string, now time.Time) *rejection {
	st := rt.state.Load()
	cfg := st.cfg
	if cfg.broken != "" {
		return reject(http.StatusServiceUnavailable, ReasonUnavailable, "the service is misconfigured: "+cfg.broken)
	}
	// 1. Caller IP.
	client, forwardedFor := g.clientIP(r)
	if contains(cfg.denyIPs, client) {
		return reject(http.StatusForbidden, ReasonIPDenied, fmt.Sprintf("caller %s is on the service's deny list", client))
	}
	if len(cfg.allowIPs) > 0 && !contains(cfg.allowIPs, client) {
		return reject(http.StatusForbidden, ReasonIPNotAllowed, fmt.Sprintf("caller %s is not on the service's allow list", client))
	}
	// 2. Authentication and consumers.
	consumer, rej := authenticate(r, cfg)
	if rej != nil {
		return rej
	}
	// 3. Request control.
	if rej := checkRequest(r, cfg, rest); rej != nil {
		return rej
	}
	// 4. Kill switch.
	if cfg.killSwitch != "" {
		return reject(http.StatusServiceUnavailable, ReasonKillSwitch, "the service is switched off: "+cfg.killSwitch)
	}
	// 5. Flow control.
	slot, rej := admit(st, rt, consumer, now)
	if rej != nil {
		return rej
	}
	if slot {
		defer rt.release()
	}
	// 6. Circuit breaker.
	done := func(error) {}
	if st.breaker != nil {
		if done, rej = st.breaker.allow(now); rej != nil {
			return rej
		}
	}
	// 7. Proxy.
	if len(cfg.endpoints) == 0 {
		done(errExcluded)
		return reject(http.StatusServiceUnavailable, ReasonUnavailable, "the service has no ready endpoint: "+cfg.unavailable)
	}
	endpoint := cfg.endpoints[rt.next.Add(1)%uint64(len(cfg.endpoints))]
	if st.breaker == nil {
		return g.forward(w, r, cfg, consumer, endpoint, rest, forwardedFor)
	}
	// The outcome is reported in a defer: the proxy panics
	// (http.ErrAbortHandler) when an answer breaks off mid-body, and a
	// half-open breaker whose probe is never reported refuses every call
	// from then on.
	returned := false
	defer func() {
		elapsed := time.Since(now)
		code := w.code
		switch {
		case !returned && elapsed >= cfg.timeout:
			code = http.StatusGatewayTimeout
		case !returned:
			code = http.StatusBadGateway // the pod broke off, unless the caller went away
		case rej != nil:
			code = rej.code
		}
		callerGone := w.callerGone || r.Context().Err() != nil && (rej == nil || !returned)
		done(st.breaker.outcome(code, elapsed, callerGone))
	}()
	rej = g.forward(w, r, cfg, consumer, endpoint, rest, forwardedFor)
	returned = true
	return rej
}
