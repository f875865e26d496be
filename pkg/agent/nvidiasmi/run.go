package nvidiasmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"time"
)

// ErrNotFound is returned, wrapped, when the node has no NVIDIA GPUs to
// report: nvidia-smi is not there (a node without NVIDIA drivers, or a
// container the NVIDIA runtime did not inject), or it finds no devices. The
// agent reports such a node as having no GPUs rather than as failing.
var ErrNotFound = errors.New("no NVIDIA GPUs: nvidia-smi not found or found no devices")

// DefaultTimeout bounds a run of nvidia-smi when Runner.Timeout is not set.
// A healthy driver answers in well under a second; a wedged one (a card
// fallen off the bus, a driver upgrade under way) can hang nvidia-smi for
// minutes, and the agent must go on reporting the rest.
const DefaultTimeout = 10 * time.Second

// Runner runs nvidia-smi.
type Runner struct {
	// Path is the nvidia-smi binary; exec.LookPath("nvidia-smi") when empty.
	Path string
	// Timeout bounds each run; DefaultTimeout when zero or negative.
	Timeout time.Duration
}

// errInvalidField marks a run that nvidia-smi refused because it does not
// know a queried field.
var errInvalidField = errors.New("unknown field")

// Cards runs nvidia-smi with Query and parses its output (see Parse: with
// the cards of the good lines, it returns the errors of the bad ones). It
// returns an error wrapping ErrNotFound when there are no NVIDIA GPUs, and
// ctx's error when ctx ends or the timeout passes first. Drivers before 510
// reject compute_cap; when nvidia-smi says a field is not valid, Cards asks
// again without compute_cap, and the cards come back without compute
// capability.
func (r Runner) Cards(ctx context.Context) ([]Card, error) {
	path := r.Path
	if path == "" {
		p, err := exec.LookPath("nvidia-smi")
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		path = p
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := run(ctx, path, Query)
	if errors.Is(err, errInvalidField) {
		out, err = run(ctx, path, legacyQuery)
	}
	if err != nil {
		return nil, err
	}
	cards, err := Parse(out)
	if err != nil {
		return cards, fmt.Errorf("%s: %w", path, err)
	}
	return cards, nil
}

// run runs nvidia-smi at path with the query and returns its standard output.
func run(ctx context.Context, path, query string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "--query-gpu="+query, "--format=csv,noheader,nounits")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Once ctx ends and nvidia-smi is killed, stop waiting for its output
	// even if a child of it still holds the pipes open.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		// Runner.Path names a binary that is not there.
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", path, ctx.Err())
	}
	// nvidia-smi prints its complaints on standard output, some wrappers
	// on standard error; look at both.
	msg := strings.TrimSpace(stderr.String() + "\n" + stdout.String())
	switch {
	case strings.Contains(msg, "is not a valid field to query"):
		err = fmt.Errorf("%w: %w", errInvalidField, err)
	case strings.Contains(msg, "No devices were found"):
		err = fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if msg == "" {
		return nil, fmt.Errorf("%s --query-gpu=%s: %w", path, query, err)
	}
	return nil, fmt.Errorf("%s --query-gpu=%s: %w: %s", path, query, err, msg)
}
