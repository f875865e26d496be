package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// component is a part of the cluster that runs until its context ends.
type component struct {
	name string
	// run closes started once the component works.
	run     func(ctx context.Context, started chan<- struct{}) error
	started chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

// startAll runs the components under one context, which Stop cancels,
// and returns once each has started.
func (c *Cluster) startAll(ctx context.Context, components []*component) error {
	c.compCtx, c.compCancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, comp := range components {
		c.startComponent(c.compCtx, comp)
	}
	for _, comp := range components {
		if err := c.waitStarted(ctx, comp); err != nil {
			return err
		}
	}
	return nil
}

// startComponent runs comp under parent. A component that ends while its
// context is live fails the cluster.
func (c *Cluster) startComponent(parent context.Context, comp *component) {
	ctx, cancel := context.WithCancel(parent)
	comp.started, comp.cancel, comp.done = make(chan struct{}), cancel, make(chan struct{})
	logger := klog.FromContext(parent).WithName(comp.name)
	c.runningMu.Lock()
	if c.running == nil {
		c.running = map[*component]struct{}{}
	}
	c.running[comp] = struct{}{}
	c.runningMu.Unlock()
	c.compWG.Go(func() {
		defer func() {
			c.runningMu.Lock()
			delete(c.running, comp)
			c.runningMu.Unlock()
			close(comp.done)
		}()
		err := comp.run(klog.NewContext(ctx, logger), comp.started)
		if ctx.Err() == nil {
			if err == nil {
				err = errors.New("stopped")
			}
			c.fail(fmt.Errorf("%s: %w", comp.name, err))
		}
	})
}

func (c *Cluster) waitStarted(ctx context.Context, comp *component) error {
	select {
	case <-comp.started:
		return nil
	case <-c.failed:
		return c.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s: %w", comp.name, ctx.Err())
	}
}

// Failed is closed when a component of the cluster stopped on its own; Err
// then says which and why.
func (c *Cluster) Failed() <-chan struct{} { return c.failed }

// Err returns the failure that closed Failed, or nil.
func (c *Cluster) Err() error {
	select {
	case <-c.failed:
		return c.err
	default:
		return nil
	}
}

func (c *Cluster) fail(err error) {
	c.failOnce.Do(func() {
		c.err = err
		close(c.failed)
	})
}

// runningNames are the components still running, sorted.
func (c *Cluster) runningNames() []string {
	c.runningMu.Lock()
	defer c.runningMu.Unlock()
	names := make([]string, 0, len(c.running))
	for comp := range c.running {
		names = append(names, comp.name)
	}
	slices.Sort(names)
	return names
}

func waitGroupTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
