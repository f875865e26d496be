package httpserve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Serve answers until its context ends, ends the requests in flight that
// wait on their context, and returns nil.
func TestServe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	streaming := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(streaming)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}, l, 5*time.Second)
	}()

	resp, err := http.Get("http://" + l.Addr().String() + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Errorf("GET /ok = %q, want ok", body)
	}
	stream, err := http.Get("http://" + l.Addr().String() + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	<-streaming
	begin := time.Now()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v after its context ended, want nil", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Serve did not return: the open stream held the shutdown")
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("shutdown took %s with a stream open, want the stream ended with the context", took)
	}
	if _, err := http.Get("http://" + l.Addr().String() + "/ok"); err == nil {
		t.Error("the server still answers after Serve returned")
	}
}

// A listener that fails is Serve's error.
func TestServeListenerClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	err = Serve(context.Background(), &http.Server{ReadHeaderTimeout: time.Second}, l, time.Second)
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve on a closed listener = %v, want its error", err)
	}
}
