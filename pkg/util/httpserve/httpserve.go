// Package httpserve serves an HTTP server on a listener until a context
// ends, then shuts it down gracefully: the one loop of the console, the
// demo model server and the agent's metrics.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Serve serves srv on l until ctx ends, then stops taking connections and
// waits up to grace for the requests in flight. Requests' contexts derive
// from ctx (unless srv sets BaseContext), so that long-lived responses,
// such as event streams, end with it. It returns nil after a shutdown, the
// server's error when serving fails.
func Serve(ctx context.Context, srv *http.Server, l net.Listener, grace time.Duration) error {
	if srv.BaseContext == nil {
		srv.BaseContext = func(net.Listener) context.Context { return ctx }
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := srv.Shutdown(shutdown)
	if serveErr := <-done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		return fmt.Errorf("shutting down %s: %w", l.Addr(), err)
	}
	return nil
}
