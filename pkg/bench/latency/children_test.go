package latency

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The children here are shell scripts: what startChild supervises is any
// process, and a script says in one line what it prints and when it ends.
func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

func TestStartChild(t *testing.T) {
	if _, err := exec.LookPath("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	for _, tc := range []struct {
		name     string
		command  []string
		timeout  time.Duration
		wantLine string
		wantErr  string
	}{
		{name: "first line, in two writes, trimmed", command: sh(`printf '  serving '; sleep 0.1; echo 'on x  '; echo more; exec sleep 60`), timeout: 10 * time.Second, wantLine: "serving on x"},
		{name: "exits before it serves", command: sh(`exit 3`), timeout: 10 * time.Second, wantErr: "sh -c exit 3 exited before it served: exit status 3"},
		{name: "prints nothing in time", command: sh(`exec sleep 60`), timeout: 200 * time.Millisecond, wantErr: "sh -c exec sleep 60 printed nothing within 200ms"},
		{name: "no such program", command: []string{"/nonexistent/aisched"}, timeout: time.Second, wantErr: "aisched: fork/exec /nonexistent/aisched"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			begin := time.Now()
			c, line, err := startChild(context.Background(), &stderr, tc.timeout, tc.command)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if took := time.Since(begin); took > 5*time.Second {
					t.Errorf("startChild took %s to fail", took)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if line != tc.wantLine {
				t.Errorf("first line %q, want %q", line, tc.wantLine)
			}
			stopped := make(chan struct{})
			go func() { c.stop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("stop did not end the child within 10s")
			}
			if c.cmd.ProcessState == nil || c.cmd.ProcessState.Success() {
				t.Errorf("the child's state after stop is %v, want killed", c.cmd.ProcessState)
			}
			c.stop() // a second stop returns too
		})
	}
}

// A context that ends while the child has not served stops it.
func TestStartChildCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _, err := startChild(ctx, io.Discard, time.Minute, sh(`exec sleep 60`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the context's", err)
	}
}

// A backend that prints something other than its address, or a gateway
// that prints no GatewayAddrs, fails the run before any load, naming it.
func TestGatewayLatencyInChildrenBadFirstLine(t *testing.T) {
	opts := GatewayOptions{Rates: []int{1}, Duration: time.Second, Connections: 1}
	for _, tc := range []struct {
		name    string
		p       Processes
		wantErr string
	}{
		{"backend without address", Processes{Backend: sh(`echo ready; exec sleep 60`), Gateway: sh(`exit 1`)},
			`sh -c echo ready; exec sleep 60 printed "ready", want its address`},
		{"gateway without addresses", Processes{Backend: sh(`echo serving model demo on http://127.0.0.1:1; exec sleep 60`), Gateway: []string{"/bin/sh", "-c", `echo "backend $0"; exec sleep 60`}},
			`sh -c echo "backend $0"; exec sleep 60 127.0.0.1:1 printed "backend 127.0.0.1:1": invalid character`},
		{"no commands", Processes{}, "Processes.Backend and Processes.Gateway are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := GatewayLatencyInChildren(context.Background(), opts, tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// The child's context ends when its stdin does.
func TestUntilStdinCloses(t *testing.T) {
	r, w := io.Pipe()
	ctx, cancel := UntilStdinCloses(context.Background(), r)
	defer cancel()
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
		t.Fatal("ended while stdin is open")
	case <-time.After(50 * time.Millisecond):
	}
	w.Close()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("still running 5s after stdin closed")
	}
}
