// Package localtest starts an embedded local cluster for a test: a real
// etcd, kube-apiserver, controllers, scheduler and simulated nodes in the
// test process, on a free port and a temporary directory, stopped when the
// test ends. Tests may run clusters in parallel.
//
// Linking the control plane costs about a minute per test binary; keep
// tests that use this package in a few packages under test/integration.
package localtest

import (
	"context"
	"flag"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/aisched/aisched/pkg/local"
)

// LogEnv names the environment variable that, when set to 1, sends the
// components' logs of every cluster to stderr instead of discarding them.
const LogEnv = "AISCHED_TEST_LOG"

var klogOnce sync.Once

// Start starts a cluster with opts for the test and stops it in
// t.Cleanup. DataDir defaults to a fresh temporary directory and the
// apiserver listens on a free port.
func Start(t testing.TB, opts local.Options) *local.Cluster {
	t.Helper()
	quietKlog()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if os.Getenv(LogEnv) == "1" && opts.LogOutput == nil {
		opts.LogOutput = os.Stderr
	}
	// The context bounds the cluster's life, not only its start.
	ctx, cancel := context.WithCancel(context.Background())
	c, err := local.Start(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("start local cluster: %v", err)
	}
	t.Cleanup(func() {
		defer cancel()
		if err := c.Stop(); err != nil {
			t.Errorf("stop local cluster: %v", err)
		}
		if err := c.Err(); err != nil {
			t.Errorf("local cluster failed while the test ran: %v", err)
		}
	})
	return c
}

// quietKlog discards the components' klog output unless LogEnv is set.
// controller-runtime's process-wide logger (the platform's components)
// goes through klog too.
func quietKlog() {
	klogOnce.Do(func() {
		ctrllog.SetLogger(klog.NewKlogr())
		if os.Getenv(LogEnv) == "1" {
			return
		}
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	})
}

// Eventually polls cond every 100ms until it returns true, an error, or
// timeout passes, and fails the test naming what, with the last error cond returned.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not true after %s (last error: %v)", what, timeout, last)
	}
}
