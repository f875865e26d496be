package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/sync/semaphore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/aisched/aisched/pkg/console/ui"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/util/httpserve"
)

// Bounds of what a caller may send.
const (
	// maxBodyBytes bounds a request body: a manifest for whatif, an
	// object from a form.
	maxBodyBytes = 1 << 20
	// shutdownTimeout bounds the wait for requests in flight at stop.
	shutdownTimeout = 5 * time.Second
)

// Options configure a console.
type Options struct {
	// APIServer is how to reach the apiserver: its host and CA. Any
	// credentials in it are dropped; each call carries the user's token.
	APIServer *rest.Config
	// GatewayURL is the base URL of aisched's gateway, for test requests
	// (http://aisched-gateway.aisched-system:8480); empty turns them off.
	GatewayURL string
	// Simulations configure the simulations page; nil turns it off.
	Simulations *Simulations
	// SecureCookies marks the session cookie Secure: set it whenever
	// browsers reach the console over HTTPS (TLS here or at a proxy).
	SecureCookies bool
	// SessionTTL is how long a session lasts; default 8h.
	SessionTTL time.Duration
	// TrustAuthorizationHeader takes a request's own "Authorization:
	// Bearer" header as the user's identity (an authenticating proxy in
	// front, or a script). Browsers never add it on their own, so such
	// requests need no CSRF token.
	TrustAuthorizationHeader bool
}

// Server is the console's HTTP handler.
type Server struct {
	opts     Options
	base     *rest.Config
	sessions *sessions
	gateway  *url.URL
	mux      *http.ServeMux
	sims     chan struct{}
	// streams bounds the event streams open at once.
	streams *semaphore.Weighted
	// newClients makes the clients of a token; clientsFor but in tests.
	newClients func(token string) (*clients, error)
}

// New returns a console for opts.
func New(opts Options) (*Server, error) {
	if opts.APIServer == nil || opts.APIServer.Host == "" {
		return nil, errors.New("console: the apiserver's address is missing")
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 8 * time.Hour
	}
	if opts.SessionTTL > 7*24*time.Hour {
		return nil, fmt.Errorf("console: session TTL %s: at most 168h", opts.SessionTTL)
	}
	s := &Server{
		opts:     opts,
		base:     rest.AnonymousClientConfig(opts.APIServer),
		sessions: newSessions(opts.SessionTTL, maxSessions),
		mux:      http.NewServeMux(),
		sims:     make(chan struct{}, 1),
		streams:  semaphore.NewWeighted(maxStreams),
	}
	if opts.GatewayURL != "" {
		u, err := url.Parse(opts.GatewayURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("console: gateway URL %q: want http(s)://host[:port]", opts.GatewayURL)
		}
		s.gateway = u
	}
	s.newClients = s.clientsFor
	s.routes()
	return s, nil
}

// ForCluster returns what builds the console of a cluster whose apiserver
// and gateway are known only once it runs (local.ConsoleOptions.Handler):
// New with opts, its APIServer and GatewayURL those given.
func ForCluster(opts Options) func(apiserver *rest.Config, gatewayURL string) (http.Handler, error) {
	return func(apiserver *rest.Config, gatewayURL string) (http.Handler, error) {
		opts.APIServer, opts.GatewayURL = apiserver, gatewayURL
		return New(opts)
	}
}

func (s *Server) routes() {
	static, err := fs.Sub(ui.Files, ".")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	s.mux.Handle("GET /", http.FileServerFS(static))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	s.mux.HandleFunc("POST /api/login", s.login)
	s.mux.HandleFunc("POST /api/logout", s.logout)
	s.mux.Handle("GET /api/whoami", s.user(s.whoami))
	s.mux.Handle("GET /api/gpus", s.user(s.gpuMap))
	s.mux.Handle("GET /api/gpus/nodes", s.user(s.gpuDomainNodes))
	s.mux.Handle("GET /api/gpus/nodes/{name}", s.user(s.gpuNode))
	s.mux.Handle("GET /api/queue", s.user(s.waitingWork))
	s.mux.Handle("GET /api/events", s.user(s.events))
	s.mux.Handle("GET /api/platform/{kind}", s.user(s.listPlatform))
	s.mux.Handle("POST /api/platform/{kind}", s.user(s.createPlatform))
	s.mux.Handle("PUT /api/platform/{kind}/{namespace}/{name}", s.user(s.updatePlatform))
	s.mux.Handle("DELETE /api/platform/{kind}/{namespace}/{name}", s.user(s.deletePlatform))
	s.mux.Handle("POST /api/instances/{namespace}/{name}/state", s.user(s.setInstanceState))
	s.mux.Handle("POST /api/instances/{namespace}/{name}/scale", s.user(s.scaleInstance))
	s.mux.Handle("PUT /api/services/{namespace}/{name}/keys", s.user(s.writeKeys))
	s.mux.Handle("POST /api/services/{namespace}/{name}/try", s.user(s.tryService))
	s.mux.Handle("GET /api/simulations", s.user(s.listScenarios))
	s.mux.Handle("POST /api/simulations", s.user(s.simulate))
}

// ServeHTTP serves the console with its security headers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Only the console's own scripts, styles and API; no inline code, no
	// framing, no third parties.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if len(r.URL.Path) >= 5 && r.URL.Path[:5] == "/api/" {
		h.Set("Cache-Control", "no-store")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	s.mux.ServeHTTP(w, r)
}

// Serve serves the console on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	// Event streams stay open; each write has its own deadline.
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	return httpserve.Serve(ctx, srv, l, shutdownTimeout)
}

// clients are the user's clients: every call carries their token.
type clients struct {
	kube    kubernetes.Interface
	aisched versioned.Interface
	config  *rest.Config
}

func (s *Server) clientsFor(token string) (*clients, error) {
	cfg := rest.CopyConfig(s.base)
	cfg.BearerToken = token
	cfg.UserAgent = "aisched-console"
	cfg.QPS, cfg.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ai, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{kube: kube, aisched: ai, config: cfg}, nil
}

// apiError is the JSON body of every error the API answers.
type apiError struct {
	Error string `json:"error"`
	// Reason is the apiserver's reason (Forbidden, Invalid, ...), when the
	// error came from it.
	Reason string `json:"reason,omitempty"`
}

// writeError answers err: an apiserver error with its own status code and
// message (a refusal reads "... is forbidden: User ... cannot ..."),
// anything else as code.
func writeError(w http.ResponseWriter, code int, err error) {
	body := apiError{Error: err.Error()}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		if st.Code >= 400 && st.Code < 600 {
			code = int(st.Code)
		}
		body.Reason = string(st.Reason)
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		klog.V(2).InfoS("console: writing a response", "err", err)
	}
}

// decode reads the request body into v (readJSON), answering 400 with the
// error when it cannot.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := readJSON(r, v); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return false
	}
	return true
}

// readJSON decodes the request body into v, refusing unknown fields.
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}
