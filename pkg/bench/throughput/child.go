package throughput

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
)

// InChild returns a MeasureFunc that measures each case in a fresh child
// process: command (a program and its arguments) with the options'
// cluster (--nodes, --pods, --gpu, --shared, --fill, --rack-nodes),
// "--measure-profile <case>", "--dra" when the options ask for DRA, and,
// when the measurement profiles (Options.ProfileTo), "--measure-profile-to
// <prefix>" added; the child must run Measure with
// those options and print its ProfileResult as JSON on stdout. The
// cluster goes with each call because a suite measures a different one in
// each row. Its stderr goes to the options' Progress. The command
// `aisched bench throughput` runs itself so.
func InChild(command ...string) MeasureFunc {
	return func(ctx context.Context, opts Options, name string) (ProfileResult, error) {
		args := append(command[1:len(command):len(command)],
			"--nodes="+strconv.Itoa(opts.Nodes), "--pods="+strconv.Itoa(opts.Pods),
			"--gpu="+strconv.FormatBool(opts.GPU), "--shared="+strconv.FormatBool(opts.Shared),
			"--fill="+strconv.FormatFloat(opts.Fill, 'g', -1, 64), "--rack-nodes="+strconv.Itoa(opts.RackNodes),
			"--measure-profile="+name)
		if opts.DRA {
			args = append(args, "--dra")
		}
		if opts.ProfileTo != "" {
			args = append(args, "--measure-profile-to="+opts.ProfileTo)
		}
		cmd := exec.CommandContext(ctx, command[0], args...)
		cmd.Stderr = opts.Progress
		out, err := cmd.Output()
		if err != nil {
			return ProfileResult{}, fmt.Errorf("measurement process: %w", err)
		}
		var r ProfileResult
		if err := json.Unmarshal(out, &r); err != nil {
			return ProfileResult{}, fmt.Errorf("measurement process printed %q: %w", out, err)
		}
		return r, nil
	}
}
