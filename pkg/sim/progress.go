package sim

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// Ticker returns a Tick (Options.Tick, ReplayOptions.Tick) that shows
// progress on f in unit: a bar on a terminal, lines otherwise.
func Ticker(f *os.File, unit string) func(done, total int) {
	if term.IsTerminal(int(f.Fd())) {
		return tickBar(f, unit)
	}
	return tickLines(f, unit)
}

// tickBar returns a Tick that redraws a bar on the terminal at most
// ten times a second, with the time left at the pace so far, and ends the
// line when every run is done.
func tickBar(w io.Writer, unit string) func(done, total int) {
	var begin, last time.Time
	return func(done, total int) {
		now := time.Now()
		if begin.IsZero() {
			begin = now
		}
		if done < total && now.Sub(last) < 100*time.Millisecond {
			return
		}
		last = now
		const width = 40
		filled := width * done / max(total, 1)
		fmt.Fprintf(w, "\r[%s%s] %d/%d %s, %s", strings.Repeat("#", filled), strings.Repeat(" ", width-filled), done, total, unit, eta(now.Sub(begin), done, total))
		if done == total {
			fmt.Fprintln(w)
		}
	}
}

// tickLines returns a Tick for a log or CI: a line at every tenth of
// the work, with the time since it began and the time left.
func tickLines(w io.Writer, unit string) func(done, total int) {
	var begin time.Time
	next := 0
	return func(done, total int) {
		if begin.IsZero() {
			begin = time.Now()
		}
		if done < next || done == 0 {
			return
		}
		next = done + max(total/10, 1)
		elapsed := time.Since(begin)
		fmt.Fprintf(w, "%d/%d %s after %s, %s\n", done, total, unit, elapsed.Round(time.Second), eta(elapsed, done, total))
	}
}

// eta says how long the rest of the work takes at the pace so far.
func eta(elapsed time.Duration, done, total int) string {
	switch {
	case done >= total:
		return fmt.Sprintf("done in %s   ", elapsed.Round(time.Second))
	case done == 0:
		return "ETA unknown"
	}
	left := time.Duration(float64(elapsed) * float64(total-done) / float64(done))
	return fmt.Sprintf("ETA %s   ", left.Round(time.Second))
}
