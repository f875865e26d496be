package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// TestREADME follows the README's first hour literally: the shell blocks
// of README.md up to "## Serving a model" (make up; in a second terminal,
// a gang asked about with whatif, applied and waited for; the Deployment
// example) and then the hints the ready banner prints, each line run by a
// shell interpreter (mvdan.cc/sh) in the repository's root with a fresh
// home directory, and each must exit 0. Only the processes are the test's:
// `make up` is this test binary as `aisched up` on free ports (its data in
// the README's ~/.local/share/aisched), `aisched` is this test binary as
// the aisched binary, and `make test` is not run (it is this suite). Then
// whatif is asked again about the gang, now that it runs: the cluster's
// job, read as itself.
func TestREADME(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	firstHour, _, ok := strings.Cut(string(readme), "\n## Serving a model")
	if !ok {
		t.Fatal(`README.md has no "## Serving a model" section to end the first hour at`)
	}
	sh := &readmeShell{t: t, root: root, home: t.TempDir(), tmp: t.TempDir()}
	var blocks int
	for _, block := range shellBlocks(firstHour) {
		blocks++
		sh.run(block)
	}
	if blocks < 3 || sh.up == nil {
		t.Fatalf("the README's first hour has %d shell blocks, started aisched up: %t; want make up and the commands after it", blocks, sh.up != nil)
	}
	// It fits now, each worker on a GPU node's cards (a pod made from a
	// template has the GPU requests the apiserver would give it).
	if before := sh.said["aisched whatif -f examples/gang-job.yaml"]; !strings.Contains(before, "The job fits now.") ||
		strings.Count(before, " on gpu-") != 2 || strings.Count(before, ", cards ") != 2 {
		t.Errorf("whatif on the gang before it is applied:\n%s\nwant it to fit now, both workers on GPU nodes' cards", before)
	}

	// The banner's hints, as printed.
	sh.up.waitLine(t, "Press Ctrl-C", 10*time.Second)
	_, hints, ok := strings.Cut(sh.up.Output(), "try, in another terminal:")
	if !ok || !strings.Contains(hints, "kubectl get nodes") {
		t.Fatalf("the ready banner has no hints to try:\n%s", sh.up.Output())
	}
	var lines []string
	for _, line := range strings.Split(hints, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "Press Ctrl-C") {
			break
		}
		// The platform's demo needs its pods and curl; TestExamples runs it.
		if line != "" && !strings.HasPrefix(line, "examples/platform/try.sh") {
			lines = append(lines, line)
		}
	}
	sh.run(strings.Join(lines, "\n"))

	// Asked again, now that the gang runs: whatif reads it as itself.
	sh.run("aisched whatif -f examples/gang-job.yaml")
	again := sh.said["aisched whatif -f examples/gang-job.yaml"]
	for _, want := range []string{"The job is in the cluster already: 2 of its 2 pods exist, 2 bound", "pod group default/train: Running", "The job is placed: every pod is bound."} {
		if !strings.Contains(again, want) {
			t.Errorf("whatif on the running gang says:\n%s\nwant %q", again, want)
		}
	}
}

// shellBlocks returns the bodies of the ```sh blocks of markdown, in order.
func shellBlocks(markdown string) []string {
	var out []string
	rest := markdown
	for {
		_, after, ok := strings.Cut(rest, "```sh\n")
		if !ok {
			return out
		}
		body, tail, ok := strings.Cut(after, "```")
		if !ok {
			return out
		}
		out = append(out, body)
		rest = tail
	}
}

// readmeShell runs the README's lines, one statement at a time, keeping
// the shell's state (exported variables, the directory) between blocks.
type readmeShell struct {
	t               *testing.T
	root, home, tmp string
	runner          *interp.Runner
	up              *upProcess
	// said is each command's output, by its line as the shell prints it.
	said map[string]string
}

func (s *readmeShell) run(script string) {
	t := s.t
	t.Helper()
	if s.runner == nil {
		s.said = map[string]string{}
		env := []string{"HOME=" + s.home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + s.tmp}
		r, err := interp.New(interp.Dir(s.root), interp.Env(expand.ListEnviron(env...)),
			interp.ExecHandlers(s.exec))
		if err != nil {
			t.Fatal(err)
		}
		s.runner = r
	}
	file, err := syntax.NewParser().Parse(strings.NewReader(script), "README.md")
	if err != nil {
		t.Fatalf("the README's shell does not parse: %v\n%s", err, script)
	}
	printer := syntax.NewPrinter()
	for _, stmt := range file.Stmts {
		var line bytes.Buffer
		if err := printer.Print(&line, stmt); err != nil {
			t.Fatal(err)
		}
		cmd := line.String()
		var out bytes.Buffer
		if err := interp.StdIO(nil, &out, &out)(s.runner); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		err := s.runner.Run(ctx, stmt)
		cancel()
		t.Logf("$ %s\n%s", cmd, out.String())
		s.said[cmd] = out.String()
		if err != nil {
			t.Fatalf("%q: %v\n%s", cmd, err, out.String())
		}
	}
}

// exec runs a command of the README: make up and aisched are this test
// binary; anything else runs as it is.
func (s *readmeShell) exec(next interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	return func(ctx context.Context, args []string) error {
		hc := interp.HandlerCtx(ctx)
		switch {
		case len(args) == 2 && args[0] == "make" && args[1] == "up":
			// make up builds bin/aisched and runs `bin/aisched up $(ARGS)`:
			// this binary stands for the build, free ports for the
			// defaults (other tests run beside this one), and the data
			// directory is the README's, under its home.
			s.up = startUp(s.t, filepath.Join(s.home, ".local", "share", "aisched"), s.tmp)
			fmt.Fprintln(hc.Stdout, s.up.Output())
			return nil
		case len(args) == 2 && args[0] == "make" && args[1] == "test":
			fmt.Fprintln(hc.Stdout, "(not run: it is the suite this test is part of)")
			return nil
		case args[0] == "make":
			return fmt.Errorf("the README runs %q, which TestREADME does not stand in for", strings.Join(args, " "))
		case filepath.Base(args[0]) == "aisched" || args[0] == os.Args[0]:
			// aisched, bin/aisched, or this binary as the banner names it.
			cmd := exec.CommandContext(ctx, os.Args[0], args[1:]...)
			cmd.Dir, cmd.Env = hc.Dir, append(shellEnv(hc.Env), mainEnv+"=1")
			out, err := cmd.CombinedOutput()
			fmt.Fprint(hc.Stdout, string(out))
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return interp.ExitStatus(uint8(exit.ExitCode()))
			}
			return err
		}
		return next(ctx, args)
	}
}

// shellEnv is the shell's exported variables, as a process gets them.
func shellEnv(env expand.Environ) []string {
	var out []string
	env.Each(func(name string, vr expand.Variable) bool {
		if vr.Exported && vr.IsSet() && vr.Kind == expand.String {
			out = append(out, name+"="+vr.String())
		}
		return true
	})
	return out
}
