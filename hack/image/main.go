// Command image builds the aisched release image without a container daemon:
// for each --binary, a FROM-scratch image of one reproducible layer (the
// binary, CA roots, a nonroot user), gathered into one OCI image index. It
// checks the result (the host's binary runs and reports --version; no image
// runs as root), then writes it as an OCI image layout (--out) and/or pushes
// it to <repository>:<version> (--push).
//
//	cd hack/image && go run . --binary linux/amd64=../../bin/linux_amd64/aisched \
//	  --version v0.1.0 --out ../../bin/image
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// maxEpoch is 9999-12-31T23:59:59Z, the last second an RFC 3339 timestamp
// (the image config's "created") can hold.
const maxEpoch = 253402300799

// tagPattern is the OCI distribution spec's grammar of a tag.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// config is the validated command line.
type config struct {
	binaries   []binary // sorted by platform, one per platform
	version    string
	repository string
	revision   string
	epoch      time.Time // every timestamp in the image
	out        string
	push       bool
}

// binary is one --binary flag: the aisched executable for one platform.
type binary struct {
	platform v1.Platform
	path     string
}

// stringsFlag collects the values of a repeatable flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg, err := parseFlags(os.Args[1:], os.Getenv, os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case err != nil:
		fmt.Fprintf(os.Stderr, "image: %v (see --help)\n", err)
		stop()
		os.Exit(2)
	}
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		stop()
		os.Exit(1)
	}
}

// parseFlags parses and validates args; getenv supplies SOURCE_DATE_EPOCH
// and usage receives --help. Every error names the flag at fault.
func parseFlags(args []string, getenv func(string) string, usage io.Writer) (config, error) {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var bins stringsFlag
	fs.Var(&bins, "binary", "`OS/ARCH[/VARIANT]=PATH` of a static aisched ELF executable; repeat once per platform (required)")
	version := fs.String("version", "", "release `VERSION`: the image tag and org.opencontainers.image.version (required)")
	repository := fs.String("repository", "ghcr.io/aisched/aisched", "`REPOSITORY` that --push pushes <repository>:<version> to")
	epochFlag := fs.String("source-date-epoch", "", "Unix time `N` of every timestamp in the image (default $SOURCE_DATE_EPOCH, else 0)")
	revision := fs.String("revision", "", "source revision (git commit `SHA`) for org.opencontainers.image.revision (optional)")
	out := fs.String("out", "", "`DIR` to write the OCI image layout to; an existing layout there is replaced")
	push := fs.Bool("push", false, "push the image index to <repository>:<version>")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(usage)
			fmt.Fprintln(usage, "usage: go run . --binary OS/ARCH=PATH... --version VERSION [--out DIR] [--push] [flags]")
			fs.PrintDefaults()
		}
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q: every input is a flag", fs.Arg(0))
	}

	cfg := config{revision: *revision, out: *out, push: *push}
	if len(bins) == 0 {
		return config{}, errors.New("--binary: at least one OS/ARCH=PATH is required")
	}
	for _, s := range bins {
		b, err := parseBinary(s)
		if err != nil {
			return config{}, err
		}
		if slices.ContainsFunc(cfg.binaries, func(o binary) bool { return o.platform.Architecture == b.platform.Architecture }) {
			return config{}, fmt.Errorf("--binary %s: a second binary for %s", s, b.platform.Architecture)
		}
		cfg.binaries = append(cfg.binaries, b)
	}
	slices.SortFunc(cfg.binaries, func(a, b binary) int { return strings.Compare(a.platform.String(), b.platform.String()) })

	if *version == "" {
		return config{}, errors.New("--version is required")
	}
	// The version is also the tag pushed, so it must be a valid tag: this
	// rules out whitespace, slashes and colons too.
	if !tagPattern.MatchString(*version) {
		return config{}, fmt.Errorf("--version %q: not a valid image tag (%s)", *version, tagPattern)
	}
	cfg.version = *version

	repo, err := name.NewRepository(*repository, name.StrictValidation)
	if err != nil {
		return config{}, fmt.Errorf("--repository %q: %w", *repository, err)
	}
	cfg.repository = repo.Name()

	if strings.ContainsFunc(cfg.revision, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return config{}, fmt.Errorf("--revision %q: must not contain whitespace or control characters", cfg.revision)
	}

	src, raw := "--source-date-epoch", *epochFlag
	if !flagSet(fs, "source-date-epoch") {
		src, raw = "SOURCE_DATE_EPOCH", getenv("SOURCE_DATE_EPOCH")
		if raw == "" {
			raw = "0"
		}
	}
	epoch, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || epoch < 0 || epoch > maxEpoch {
		return config{}, fmt.Errorf("%s %q: want whole seconds since 1970, from 0 to %d", src, raw, maxEpoch)
	}
	cfg.epoch = time.Unix(epoch, 0).UTC()

	if cfg.out == "" && !cfg.push {
		return config{}, errors.New("--out or --push: nothing to do, give at least one")
	}
	return cfg, nil
}

// parseBinary parses one --binary OS/ARCH[/VARIANT]=PATH.
func parseBinary(s string) (binary, error) {
	plat, path, ok := strings.Cut(s, "=")
	parts := strings.Split(plat, "/")
	if !ok || path == "" || len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return binary{}, fmt.Errorf("--binary %q: want OS/ARCH[/VARIANT]=PATH, such as linux/amd64=bin/linux_amd64/aisched", s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	if _, ok := elfMachines[p.Architecture]; !ok || p.OS != "linux" {
		return binary{}, fmt.Errorf("--binary %q: unsupported platform %s (want linux/amd64 or linux/arm64)", s, plat)
	}
	return binary{platform: p, path: path}, nil
}

// flagSet reports whether the command line set the named flag.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// run builds the image index, checks it, and writes and/or pushes it.
func run(ctx context.Context, cfg config, w io.Writer) error {
	idx, err := buildIndex(cfg)
	if err != nil {
		return err
	}
	rep, err := selfCheck(ctx, idx, cfg.version)
	if err != nil {
		return err
	}
	rep.print(w)
	if cfg.out != "" {
		if err := writeLayout(cfg.out, idx, cfg.version); err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote OCI image layout %s (ref %s)\n", cfg.out, cfg.version)
	}
	if cfg.push {
		ref, err := push(ctx, cfg.repository, cfg.version, idx)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "pushed %s@%s\n", ref, rep.index)
	}
	return nil
}
