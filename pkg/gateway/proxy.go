package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// targetKey is the context key of a proxied request's target.
type targetKey struct{}

// target is where rewrite sends a request.
type target struct {
	endpoint, path string
	consumer       string
	apiKey         bool
	connectTimeout time.Duration
	forwardedFor   []string // the X-Forwarded-For hops to keep (from trusted proxies)
	body           *callerBody
	// buffered is the caller's body read whole, for rewrite to hand to the
	// transport as it is: the proxy wraps a body in a reader of its own,
	// which the transport no longer knows to be in memory.
	buffered io.ReadCloser
}

// maxBufferedBody is the largest request body that is read whole before
// the request goes to the pod, as nginx's client_body_buffer_size (16k).
// The transport then writes headers and body at once: a body it has to
// stream costs a write of the headers first, and the pod a second read.
const maxBufferedBody = 16 << 10

// forward proxies the request to endpoint within the service's request
// timeout; forwardedFor is the believed X-Forwarded-For chain.
func (g *Gateway) forward(w *recorder, r *http.Request, cfg *routeConfig, consumer, endpoint, rest string, forwardedFor []string) *rejection {
	ctx, cancel := context.WithTimeoutCause(r.Context(), cfg.timeout, errRequestTimeout)
	defer cancel()
	t := &target{endpoint: endpoint, path: joinPath(cfg.backendPath, rest), consumer: consumer, apiKey: cfg.apiKey, connectTimeout: cfg.connectTimeout, forwardedFor: forwardedFor}
	ctx = context.WithValue(ctx, targetKey{}, t)
	out := r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		t.body = &callerBody{r: r.Body, left: cfg.maxBody, caller: *http.NewResponseController(w)}
		if cfg.maxBody <= 0 {
			t.body.left = -1
		}
		out.Body = t.body
		// The request timeout bounds the caller's body too: the transport
		// gives up on the pod only once its read of the body returns, so a
		// caller that stops sending would hold the request, and its
		// concurrency slot, for as long as it likes. Once the body is read
		// the deadline goes: the server reads on to see the caller leave.
		if deadline, ok := ctx.Deadline(); ok && t.body.caller.SetReadDeadline(deadline) == nil {
			t.body.deadline = true
		}
		// A caller that expects 100 Continue gets it when the pod asks
		// for the body, not from the gateway.
		if r.ContentLength > 0 && r.ContentLength <= maxBufferedBody && r.Header.Get("Expect") == "" {
			body, err := t.body.readAll(r.ContentLength)
			if err != nil {
				failed(ctx, w, t, err)
				return w.rejection
			}
			t.buffered = io.NopCloser(bytes.NewReader(body))
			out.Body = t.buffered
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
	if t.buffered != nil {
		pr.Out.Body = t.buffered
	}
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
	failed(r.Context(), w.(*recorder), r.Context().Value(targetKey{}).(*target), err)
}

// failed records on rec the answer to a call to t that failed with err,
// the call's context being ctx: the gateway's rejection, or that the
// caller went away.
func failed(ctx context.Context, rec *recorder, t *target, err error) {
	var rej *rejection
	switch {
	case t.body != nil && errors.Is(t.body.err, os.ErrDeadlineExceeded):
		// The caller's body stopped coming until the request timeout (the
		// read deadline forward set): the caller's failure, not the pod's.
		// Checked first: the failed read cancels the request, maybe before
		// the timeout's own context ends.
		rec.callerGone = true
		rej = reject(http.StatusGatewayTimeout, ReasonUpstreamTimeout, "the request body did not arrive within the request timeout")
	case errors.Is(context.Cause(ctx), errRequestTimeout):
		rej = reject(http.StatusGatewayTimeout, ReasonUpstreamTimeout, "the service did not answer within the request timeout")
	case ctx.Err() != nil:
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
		klog.FromContext(ctx).V(2).Info("Proxy error", "endpoint", t.endpoint, "err", err)
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
	// caller is the caller's connection; deadline says its read deadline
	// is set, to be cleared once the whole body is read.
	caller   http.ResponseController
	deadline bool
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
		if b.deadline {
			_ = b.caller.SetReadDeadline(time.Time{})
			b.deadline = false
		}
	case err != nil:
		b.err = err
	}
}

// readAll reads the body, of n bytes, to its end.
func (b *callerBody) readAll(n int64) ([]byte, error) {
	// One byte more: the read that ends the body may come after the last
	// byte, and the server never reads past the Content-Length.
	buf := make([]byte, n+1)
	got := 0
	for got < len(buf) {
		m, err := b.Read(buf[got:])
		got += m
		if errors.Is(err, io.EOF) {
			return buf[:got], nil
		}
		if err != nil {
			return nil, err
		}
	}
	// The server stops at the Content-Length: a caller's body, not the
	// pod's failure.
	b.err = fmt.Errorf("longer than its Content-Length of %d bytes", n)
	return nil, b.err
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
// per response. It keeps them as arrays: a slice put in a sync.Pool would
// cost an allocation each time.
type bufferPool struct{ p sync.Pool }

const copyBufferSize = 32 << 10

type copyBuffer [copyBufferSize]byte

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*copyBuffer); ok {
		return v[:]
	}
	return new(copyBuffer)[:]
}

func (b *bufferPool) Put(buf []byte) {
	if len(buf) == copyBufferSize {
		b.p.Put((*copyBuffer)(buf))
	}
}
