package integration

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	nrilog "github.com/containerd/nri/pkg/log"

	"github.com/aisched/aisched/cmd/aisched/app"
	"github.com/aisched/aisched/pkg/agent/deliver"
)

// mainEnv makes the test binary behave as the aisched binary.
const mainEnv = "AISCHED_INTEGRATION_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(app.Main(os.Args[1:]))
	}
	// The simulated nodes' NRI runtimes log through NRI's process-wide
	// logger, as in the aisched binary: to klog, not logrus's stderr.
	nrilog.Set(deliver.NRILogger{})
	os.Exit(m.Run())
}

// command is the aisched binary running as a child process.
type command struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	output []string
	lines  chan string
	done   chan struct{}
	err    error
}

// startCommand runs "aisched args..." with the given extra environment;
// the process is killed when the test ends.
func startCommand(t *testing.T, env []string, args ...string) *command {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), mainEnv+"=1"), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	c := &command{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(pr)
		for s.Scan() {
			c.mu.Lock()
			c.output = append(c.output, s.Text())
			c.mu.Unlock()
			select {
			case c.lines <- s.Text():
			default:
			}
		}
	}()
	go func() {
		c.err = cmd.Wait()
		pw.Close()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			if err := cmd.Process.Kill(); err != nil {
				t.Errorf("kill aisched: %v", err)
			}
			<-c.done
		}
		if t.Failed() {
			t.Logf("output of aisched %s:\n%s", strings.Join(args, " "), c.Output())
		}
	})
	return c
}

// waitLine returns the first output line that contains substr.
func (c *command) waitLine(t *testing.T, substr string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line := <-c.lines:
			if strings.Contains(line, substr) {
				return line
			}
		case <-c.done:
			// Drain what is left, then give up.
			for {
				select {
				case line := <-c.lines:
					if strings.Contains(line, substr) {
						return line
					}
				default:
					t.Fatalf("aisched exited (%v) before printing %q", c.err, substr)
				}
			}
		case <-deadline:
			t.Fatalf("aisched did not print %q within %s", substr, timeout)
		}
	}
}

// wait waits for the process to exit and returns its error.
func (c *command) wait(ctx context.Context) error {
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Output returns everything printed so far.
func (c *command) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.output, "\n")
}

// runCommand runs "aisched args..." to completion and returns its combined output.
func runCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// every calls f(0), f(1), ... once a period, in a goroutine that wg
// counts, until done closes: the churn of the soak and the fault tests.
func every(wg *sync.WaitGroup, done <-chan struct{}, period time.Duration, f func(n int)) {
	wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			f(n)
		}
	})
}
