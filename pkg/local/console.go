package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/aisched/aisched/pkg/console"
)

// DefaultConsoleAddr is where `aisched up` serves the console.
const DefaultConsoleAddr = "127.0.0.1:8490"

// ConsoleOptions configure the web console of a local cluster.
type ConsoleOptions struct {
	// Addr is the console's address; default 127.0.0.1:0 (a free port).
	Addr string
	// Simulator runs the simulations page; nil turns it off.
	Simulator console.Simulator
}

// listenConsole opens the console's listener before any component starts.
func listenConsole(opts ConsoleOptions) (net.Listener, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("console address %s is in use; choose another with --console-addr", addr)
		}
		return nil, fmt.Errorf("console address %s: %w", addr, err)
	}
	return l, nil
}

// consoleComponent serves the console on l. It reaches the apiserver with
// no rights of its own: each call carries the signed-in user's token.
func (c *Cluster) consoleComponent(l net.Listener, opts ConsoleOptions) (*component, error) {
	srv, err := console.New(console.Options{APIServer: c.Config, GatewayURL: c.GatewayURL(), Simulator: opts.Simulator})
	if err != nil {
		return nil, err
	}
	return &component{name: "console", run: func(ctx context.Context, started chan<- struct{}) error {
		close(started)
		return srv.Serve(ctx, l)
	}}, nil
}

// ConsoleURL is the console's URL, empty when it is off.
func (c *Cluster) ConsoleURL() string {
	if c.console == nil {
		return ""
	}
	return "http://" + c.console.Addr().String() + "/"
}
