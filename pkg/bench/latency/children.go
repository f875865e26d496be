package latency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Processes are the command lines (a program and its arguments) of the
// benchmark's two servers, each run as a child process that serves until
// it is stopped.
type Processes struct {
	// Backend serves the demo model on loopback and prints "serving model
	// NAME on http://ADDR" as its first line (aisched demo-model
	// --bind-address 127.0.0.1:0).
	Backend []string
	// Gateway, with the backend's address added, serves the bench gateway
	// in front of it (ServeGateway) and prints its GatewayAddrs as its
	// first line (aisched bench gateway --serve-gateway).
	Gateway []string
	// StartTimeout bounds the wait for each one's first line; default
	// DefaultStartTimeout.
	StartTimeout time.Duration
}

// DefaultStartTimeout bounds the wait for a child's first line.
const DefaultStartTimeout = 30 * time.Second

// GatewayLatencyInChildren starts the backend and the gateway of p as
// child processes, measures them with GatewayLatency (opts' Backend,
// Gateway and GatewayPID are theirs), and kills them. Their stderr goes
// to opts.Progress.
func GatewayLatencyInChildren(ctx context.Context, opts GatewayOptions, p Processes) (*GatewayResult, error) {
	if len(p.Backend) == 0 || len(p.Gateway) == 0 {
		return nil, errors.New("Processes.Backend and Processes.Gateway are required")
	}
	if p.StartTimeout <= 0 {
		p.StartTimeout = DefaultStartTimeout
	}
	stderr := opts.Progress
	if stderr == nil {
		stderr = io.Discard
	}
	backend, line, err := startChild(ctx, stderr, p.StartTimeout, p.Backend)
	if err != nil {
		return nil, err
	}
	defer backend.stop()
	_, addr, ok := strings.Cut(line, " on http://")
	if !ok || !strings.HasPrefix(line, "serving model ") {
		return nil, fmt.Errorf("%s printed %q, want its address", backend.name, line)
	}
	opts.Backend = addr
	gw, line, err := startChild(ctx, stderr, p.StartTimeout, append(p.Gateway[:len(p.Gateway):len(p.Gateway)], opts.Backend))
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	opts.GatewayPID = gw.cmd.Process.Pid
	if err := json.Unmarshal([]byte(line), &opts.Gateway); err != nil {
		return nil, fmt.Errorf("%s printed %q: %w", gw.name, line, err)
	}
	fmt.Fprintf(stderr, "backend on %s, gateway on %s (admin %s)\n", opts.Backend, opts.Gateway.Traffic, opts.Gateway.Admin)
	return GatewayLatency(ctx, opts)
}

// UntilStdinCloses is the child's side of a stop: the returned context
// ends with ctx or when stdin reaches its end, which it does when the
// parent stops the child or dies, so that a killed benchmark leaves no
// server behind.
func UntilStdinCloses(ctx context.Context, stdin io.Reader) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	return ctx, cancel
}

// child is a process that serves until stopped.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.Closer
	exited chan error
}

// startChild runs command and returns it with the first line it prints on
// stdout; the rest of its stdout is dropped, its stderr goes to stderr.
// Errors name it by its program's base name and its arguments.
func startChild(ctx context.Context, stderr io.Writer, timeout time.Duration, command []string) (*child, string, error) {
	name := strings.Join(append([]string{filepath.Base(command[0])}, command[1:]...), " ")
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	// Not the *os.File itself: the child writes into a pipe of this
	// process, so a child that outlives it holds nothing of whoever reads
	// this process's stderr.
	cmd.Stderr = struct{ io.Writer }{stderr}
	first := &firstLine{line: make(chan string, 1)}
	cmd.Stdout = first
	cmd.WaitDelay = time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, stdin: stdin, exited: make(chan error, 1)}
	go func() { c.exited <- cmd.Wait() }()
	select {
	case line := <-first.line:
		return c, line, nil
	case err := <-c.exited:
		c.exited <- err
		return nil, "", fmt.Errorf("%s exited before it served: %w", name, err)
	case <-time.After(timeout):
		c.stop()
		return nil, "", fmt.Errorf("%s printed nothing within %s", name, timeout)
	case <-ctx.Done():
		c.stop()
		return nil, "", ctx.Err()
	}
}

// stop closes the child's stdin, kills it and waits for it.
func (c *child) stop() {
	_ = c.stdin.Close()
	_ = c.cmd.Process.Kill()
	err := <-c.exited
	c.exited <- err
}

// firstLine is a child's stdout: it passes on the first line and drops the
// rest.
type firstLine struct {
	buf  []byte
	sent bool
	line chan string
}

func (f *firstLine) Write(p []byte) (int, error) {
	if f.sent {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		f.line <- strings.TrimSpace(string(f.buf[:i]))
		f.sent, f.buf = true, nil
	}
	return len(p), nil
}
