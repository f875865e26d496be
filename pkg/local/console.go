package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/aisched/aisched/pkg/util/httpserve"
)

// DefaultConsoleAddr is where `aisched up` serves the console.
const DefaultConsoleAddr = "127.0.0.1:8490"

// consoleShutdownTimeout bounds the wait for the console's requests in
// flight at stop.
const consoleShutdownTimeout = 5 * time.Second

// ConsoleOptions configure the web console of a local cluster.
type ConsoleOptions struct {
	// Addr is the console's address; default 127.0.0.1:0 (a free port).
	Addr string
	// Handler builds the console once the cluster's apiserver and gateway
	// are known (gatewayURL is empty when the platform is off); the
	// cluster serves it on Addr. (`aisched up` passes console.New: this
	// package does not link the console.)
	Handler func(apiserver *rest.Config, gatewayURL string) (http.Handler, error)
}

// listenConsole opens the console's listener before any component starts.
func listenConsole(opts ConsoleOptions) (net.Listener, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &ListenError{Listener: ConsoleListener, Addr: addr, InUse: errors.Is(err, syscall.EADDRINUSE), Err: err}
	}
	return l, nil
}

// consoleComponent serves the console on l.
func (c *Cluster) consoleComponent(l net.Listener, opts ConsoleOptions) (*component, error) {
	h, err := opts.Handler(c.Config, c.GatewayURL())
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	// Event streams stay open; each write has its own deadline.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	return &component{name: "console", run: func(ctx context.Context, started chan<- struct{}) error {
		close(started)
		return httpserve.Serve(ctx, srv, l, consoleShutdownTimeout)
	}}, nil
}

// ConsoleURL is the console's URL, empty when it is off.
func (c *Cluster) ConsoleURL() string {
	if c.console == nil {
		return ""
	}
	return "http://" + c.console.Addr().String() + "/"
}
