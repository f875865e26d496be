package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
	"k8s.io/klog/v2"

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
			if t, ok := ctx.Value(connectTimeoutKey{}).(time.Duration); ok {
				timeout = t
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
	name, rest, _ = strings.Cut(p, "/")
	if name == "" {
		return "", "", "", false
	}
	trailing := strings.HasSuffix(rest, "/")
	rest = path.Clean("/" + rest)
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
	release, rej := admit(st, rt, consumer, now)
	if rej != nil {
		return rej
	}
	defer release()
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

// clientIP is the caller: the peer, or behind trusted proxies the
// right-most X-Forwarded-For address that is not one of them. chain is the
// part of X-Forwarded-For that is believed, from the caller on: what the
// caller wrote itself, left of it, is not passed on to the pod. Zones
// (fe80::1%eth0) are dropped: netip.Prefix.Contains never matches an
// address with one, and the lists would not apply.
func (g *Gateway) clientIP(r *http.Request) (client netip.Addr, chain []string) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, nil
	}
	peer := ap.Addr().Unmap().WithZone("")
	if !contains(g.opts.TrustedProxies, peer) {
		return peer, nil
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := range hops {
		hops[i] = strings.TrimSpace(hops[i])
	}
	client = peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			// A malformed hop ends what can be believed.
			return client, hops[i+1:]
		}
		client = a.Unmap().WithZone("")
		if !contains(g.opts.TrustedProxies, client) {
			return client, hops[i:]
		}
	}
	return client, hops
}

// authenticate checks the API key and the consumer lists; it returns the
// consumer, "" for a service without keys.
func authenticate(r *http.Request, cfg *routeConfig) (string, *rejection) {
	if !cfg.apiKey {
		return "", nil
	}
	if cfg.keysMissing != "" {
		return "", reject(http.StatusServiceUnavailable, ReasonUnavailable, cfg.keysMissing)
	}
	key := ""
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		key = strings.TrimSpace(token)
	}
	if key == "" {
		key = strings.TrimSpace(r.Header.Get("X-API-Key"))
	}
	if key == "" {
		rej := reject(http.StatusUnauthorized, ReasonMissingAPIKey, "an API key is required: Authorization: Bearer <key>, or X-API-Key: <key>")
		rej.header = http.Header{"Www-Authenticate": {`Bearer realm="aisched"`}}
		return "", rej
	}
	consumer, ok := cfg.keys.Consumer(key)
	if !ok {
		rej := reject(http.StatusUnauthorized, ReasonInvalidAPIKey, "the API key is not valid for this service")
		rej.header = http.Header{"Www-Authenticate": {`Bearer realm="aisched", error="invalid_token"`}}
		return "", rej
	}
	if cfg.denyConsumers[consumer] {
		return "", reject(http.StatusForbidden, ReasonConsumerDenied, fmt.Sprintf("consumer %q is on the service's deny list", consumer))
	}
	if cfg.allowConsumers != nil && !cfg.allowConsumers[consumer] {
		return "", reject(http.StatusForbidden, ReasonConsumerDenied, fmt.Sprintf("consumer %q is not on the service's allow list", consumer))
	}
	return consumer, nil
}

// checkRequest applies the request control.
func checkRequest(r *http.Request, cfg *routeConfig, rest string) *rejection {
	if len(cfg.methods) > 0 && !containsString(cfg.methods, r.Method) {
		rej := reject(http.StatusMethodNotAllowed, ReasonMethodNotAllowed, fmt.Sprintf("method %s is not allowed; allowed: %s", r.Method, strings.Join(cfg.methods, ", ")))
		rej.header = http.Header{"Allow": {strings.Join(cfg.methods, ", ")}}
		return rej
	}
	if len(cfg.paths) > 0 && !matchAny(cfg.paths, rest) {
		return reject(http.StatusNotFound, ReasonPathNotAllowed, fmt.Sprintf("path %s is not among the service's paths", rest))
	}
	if cfg.maxBody > 0 && r.ContentLength > cfg.maxBody {
		return reject(http.StatusRequestEntityTooLarge, ReasonBodyTooLarge, fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, cfg.maxBody))
	}
	for _, h := range cfg.requiredHeaders {
		if r.Header.Get(h) == "" {
			return reject(http.StatusBadRequest, ReasonMissingHeader, fmt.Sprintf("header %s is required", h))
		}
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func matchAny(patterns []string, p string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
	}
	return false
}

// admit takes a token from the consumer's and the service's buckets and a
// slot of the concurrency bound, all or none; release gives the slot back.
func admit(st *routeState, rt *route, consumer string, now time.Time) (release func(), rej *rejection) {
	cfg := st.cfg
	var taken []*rate.Reservation
	undo := func() {
		for _, r := range taken {
			r.CancelAt(now)
		}
	}
	if st.consumers != nil && consumer != "" {
		res := st.consumers.get(consumer).ReserveN(now, 1)
		if d := res.DelayFrom(now); !res.OK() || d > 0 {
			res.CancelAt(now)
			rej := reject(http.StatusTooManyRequests, ReasonConsumerRateLimited, fmt.Sprintf("consumer %q is over its limit of %v requests per second", consumer, cfg.consumer.qps))
			rej.retryAfter = d
			return nil, rej
		}
		taken = append(taken, res)
	}
	if st.limiter != nil {
		res := st.limiter.ReserveN(now, 1)
		if d := res.DelayFrom(now); !res.OK() || d > 0 {
			res.CancelAt(now)
			undo()
			rej := reject(http.StatusTooManyRequests, ReasonRateLimited, fmt.Sprintf("the service is over its limit of %v requests per second", cfg.service.qps))
			rej.retryAfter = d
			return nil, rej
		}
		taken = append(taken, res)
	}
	if limit := cfg.maxConcurrency; limit > 0 {
		if rt.inflight.Add(1) > limit {
			rt.inflight.Add(-1)
			undo()
			rej := reject(http.StatusTooManyRequests, ReasonTooManyConcurrent, fmt.Sprintf("the service has its maximum of %d requests in progress", limit))
			rej.retryAfter = time.Second
			return nil, rej
		}
		rt.metrics.inflight.Set(float64(rt.inflight.Load()))
		return func() {
			rt.metrics.inflight.Set(float64(rt.inflight.Add(-1)))
		}, nil
	}
	return func() {}, nil
}

// Context keys of a proxied request.
type (
	connectTimeoutKey struct{}
	targetKey         struct{}
)

// target is where rewrite sends a request.
type target struct {
	endpoint, path string
	consumer       string
	apiKey         bool
	forwardedFor   []string // the X-Forwarded-For hops to keep (from trusted proxies)
	body           *callerBody
}

// forward proxies the request to endpoint within the service's request
// timeout; forwardedFor is the believed X-Forwarded-For chain.
func (g *Gateway) forward(w *recorder, r *http.Request, cfg *routeConfig, consumer, endpoint, rest string, forwardedFor []string) *rejection {
	ctx, cancel := context.WithTimeoutCause(r.Context(), cfg.timeout, errRequestTimeout)
	defer cancel()
	t := &target{endpoint: endpoint, path: joinPath(cfg.backendPath, rest), consumer: consumer, apiKey: cfg.apiKey, forwardedFor: forwardedFor}
	ctx = context.WithValue(context.WithValue(ctx, connectTimeoutKey{}, cfg.connectTimeout), targetKey{}, t)
	out := r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		t.body = &callerBody{r: r.Body, left: cfg.maxBody}
		if cfg.maxBody <= 0 {
			t.body.left = -1
		}
		out.Body = t.body
		// The request timeout bounds the caller's body too: the transport
		// gives up on the pod only once its read of the body returns, so a
		// caller that stops sending would hold the request, and its
		// concurrency slot, for as long as it likes. Once the body is read
		// the deadline goes: the server reads on to see the caller leave.
		rc := http.NewResponseController(w)
		if deadline, ok := ctx.Deadline(); ok && rc.SetReadDeadline(deadline) == nil {
			t.body.onEOF = func() { _ = rc.SetReadDeadline(time.Time{}) }
		}
	}
	g.proxy.ServeHTTP(w, out)
	return w.rejection
}

var errRequestTimeout = errors.New("request timeout")

// joinPath puts rest (which starts with /) under the service's API path.
func joinPath(base, rest string) string {
	if base == "/" {
		return rest
	}
	if rest == "/" {
		return strings.TrimSuffix(base, "/") + "/"
	}
	return strings.TrimSuffix(base, "/") + rest
}

// rewrite makes the outgoing request: to the endpoint and path, with the
// API key removed (services never see callers' keys), the consumer named,
// and X-Forwarded-For extended only from trusted proxies.
func rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(*target)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = t.endpoint
	pr.Out.URL.Path, pr.Out.URL.RawPath = t.path, ""
	pr.Out.Host = pr.In.Host
	if t.apiKey {
		pr.Out.Header.Del("Authorization")
		pr.Out.Header.Del("X-Api-Key")
	}
	pr.Out.Header.Del("X-Aisched-Consumer")
	if t.consumer != "" {
		pr.Out.Header.Set("X-Aisched-Consumer", t.consumer)
	}
	if len(t.forwardedFor) > 0 {
		pr.Out.Header.Set("X-Forwarded-For", strings.Join(t.forwardedFor, ", "))
	}
	pr.SetXForwarded()
}

// proxyError turns a failed proxy call into the gateway's answer.
func proxyError(w http.ResponseWriter, r *http.Request, err error) {
	rec := w.(*recorder)
	t := r.Context().Value(targetKey{}).(*target)
	var rej *rejection
	switch {
	case t.body != nil && errors.Is(t.body.err, os.ErrDeadlineExceeded):
		// The caller's body stopped coming until the request timeout (the
		// read deadline forward set): the caller's failure, not the pod's.
		// Checked first: the failed read cancels the request, maybe before
		// the timeout's own context ends.
		rec.callerGone = true
		rej = reject(http.StatusGatewayTimeout, ReasonUpstreamTimeout, "the request body did not arrive within the request timeout")
	case errors.Is(context.Cause(r.Context()), errRequestTimeout):
		rej = reject(http.StatusGatewayTimeout, ReasonUpstreamTimeout, "the service did not answer within the request timeout")
	case r.Context().Err() != nil:
		// The caller went away: nobody reads an answer.
		rec.code = 499
		return
	case t.body != nil && t.body.over:
		rej = reject(http.StatusRequestEntityTooLarge, ReasonBodyTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", t.body.limit()))
	case t.body != nil && t.body.err != nil:
		// The caller's body broke (malformed chunks): the caller's
		// failure, which must not count against the pod.
		rec.callerGone = true
		rej = reject(http.StatusBadRequest, ReasonBadRequestBody, fmt.Sprintf("the request body could not be read: %v", t.body.err))
	default:
		rej = reject(http.StatusBadGateway, ReasonUpstreamError, fmt.Sprintf("endpoint %s failed: %v", t.endpoint, err))
		klog.FromContext(r.Context()).V(2).Info("Proxy error", "endpoint", t.endpoint, "err", err)
	}
	rec.rejection = rej
}

// callerBody is the request body on its way to the pod. It fails a read
// past its limit and remembers it did, and remembers an error reading from
// the caller: the transport reports either as its own error, and neither is
// the pod's failure.
type callerBody struct {
	r    io.ReadCloser
	left int64 // < 0: no limit
	read int64
	over bool
	err  error // reading from the caller, io.EOF aside
	// onEOF, if set, is called once the whole body is read.
	onEOF func()
}

func (b *callerBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		// One byte more tells a body at the limit from one over it.
		var one [1]byte
		n, err := b.r.Read(one[:])
		if n > 0 {
			b.over = true
			return 0, errors.New("request body too large")
		}
		b.ended(err)
		return 0, err
	}
	if b.left > 0 && int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	b.read += int64(n)
	b.ended(err)
	return n, err
}

func (b *callerBody) ended(err error) {
	switch {
	case errors.Is(err, io.EOF):
		if b.onEOF != nil {
			b.onEOF()
			b.onEOF = nil
		}
	case err != nil:
		b.err = err
	}
}

func (b *callerBody) limit() int64 { return b.read + b.left }

func (b *callerBody) Close() error { return b.r.Close() }

// recorder remembers the status written, and the rejection proxyError
// chose, for the metrics and the breaker.
type recorder struct {
	http.ResponseWriter
	code      int
	wrote     bool
	rejection *rejection
	// callerGone: the call failed on the caller's side (its body broke, or
	// the answer could not be written to it); the breaker does not count it.
	callerGone bool
}

func (r *recorder) WriteHeader(code int) {
	// A 1xx the proxy passes on (100 Continue, 103 Early Hints) is not the
	// answer: the status comes after it, and so may the gateway's own
	// rejection (a timeout, a body over the limit).
	if !r.wrote && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.code, r.wrote = http.StatusOK, true
	}
	n, err := r.ResponseWriter.Write(b)
	if err != nil {
		r.callerGone = true
	}
	return n, err
}

// Hijack is an upgrade's: the proxy answers 101 on the connection itself,
// without WriteHeader.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil && !r.wrote {
		r.code, r.wrote = http.StatusSwitchingProtocols, true
	}
	return conn, brw, err
}

// Unwrap lets http.ResponseController flush (streams).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// bufferPool lends the proxy its copy buffers instead of allocating 32 KiB
// per response.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
