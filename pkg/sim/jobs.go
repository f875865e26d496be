package sim

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/aisched/aisched/pkg/sim/metrics"
)

// job is one run of a command: a policy under a seed, on a fresh cluster.
type job struct {
	// label names the run in progress lines ("aisched, seed 42").
	label string
	// size is how many steps (arrivals, pods) the run takes, for the
	// progress.
	size int
	// run runs it, calling step after each step with the steps done.
	run func(ctx context.Context, step func(done int)) (metrics.Result, error)
	// done, when set, says what the progress line shows once the run is
	// over.
	done func(metrics.Result) string
}

// runJobs runs the jobs, parallel at a time, and returns their results in
// the jobs' order. The first failure stops the others. progress gets a
// line as each run starts and ends; tick, when set, the steps of all runs
// together, for a progress bar with the remaining time.
func runJobs(ctx context.Context, jobs []job, parallel int, progress io.Writer, tick func(done, total int)) ([]metrics.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	total := 0
	for _, j := range jobs {
		total += j.size
	}
	var mu sync.Mutex
	steps := make([]int, len(jobs))
	sum := 0
	report := func(i, done int) {
		mu.Lock()
		defer mu.Unlock()
		sum += done - steps[i]
		steps[i] = done
		if tick != nil {
			tick(sum, total)
		}
	}
	results := make([]metrics.Result, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(parallel, 1) {
		wg.Go(func() {
			for i := range next {
				j := jobs[i]
				mu.Lock()
				fmt.Fprintf(progress, "%s: starting\n", j.label)
				mu.Unlock()
				begin := time.Now()
				res, err := j.run(ctx, func(done int) { report(i, done) })
				if err != nil {
					errs[i] = fmt.Errorf("%s: %w", j.label, err)
					cancel()
					continue
				}
				results[i] = res
				line := fmt.Sprintf("%s: done in %.1fs", j.label, time.Since(begin).Seconds())
				if j.done != nil {
					line += ", " + j.done(res)
				}
				mu.Lock()
				fmt.Fprintln(progress, line)
				mu.Unlock()
			}
		})
	}
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, ctx.Err()
}
