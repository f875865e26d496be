package throughput

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
)

// InChild returns a MeasureFunc that measures each case in a fresh child
// process: command (a program and its arguments) with "--measure-profile
// <case>" added, and "--measure-profile-to <prefix>" when the measurement
// profiles (Options.ProfileTo), which must run Measure with the same options and print its
// ProfileResult as JSON on stdout. Its stderr goes to the options'
// Progress. The command `aisched bench throughput` runs itself so.
func InChild(command ...string) MeasureFunc {
	return func(ctx context.Context, opts Options, name string) (ProfileResult, error) {
		args := append(command[1:len(command):len(command)], "--measure-profile="+name)
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
