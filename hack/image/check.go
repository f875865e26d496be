package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// runTimeout bounds the run of the image's binary.
const runTimeout = time.Minute

// checkReport is what selfCheck found.
type checkReport struct {
	index     v1.Hash
	manifests []v1.Descriptor // the index's, with their platforms
	ran       string          // the platform whose binary ran; "" when none matches the host
	output    string          // the first line it printed
}

// selfCheck checks the built index: no image may run as root, and the image
// for the host's platform, if there is one, must hold a binary that prints
// version (as a whole word) when run as `aisched version`.
func selfCheck(ctx context.Context, idx v1.ImageIndex, version string) (checkReport, error) {
	var rep checkReport
	var err error
	if rep.index, err = idx.Digest(); err != nil {
		return rep, fmt.Errorf("self-check: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return rep, fmt.Errorf("self-check: %w", err)
	}
	rep.manifests = im.Manifests
	for _, desc := range im.Manifests {
		if desc.Platform == nil {
			return rep, fmt.Errorf("self-check: manifest %s has no platform", desc.Digest)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return rep, fmt.Errorf("self-check %s: %w", desc.Platform, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return rep, fmt.Errorf("self-check %s: %w", desc.Platform, err)
		}
		if err := checkUser(cf.Config.User); err != nil {
			return rep, fmt.Errorf("self-check %s: %w", desc.Platform, err)
		}
		if cf.OS != desc.Platform.OS || cf.Architecture != desc.Platform.Architecture {
			return rep, fmt.Errorf("self-check %s: config is for %s/%s", desc.Platform, cf.OS, cf.Architecture)
		}
		if desc.Platform.OS != runtime.GOOS || desc.Platform.Architecture != runtime.GOARCH || rep.ran != "" {
			continue
		}
		out, err := runVersion(ctx, img, cf.Config.Env)
		if err != nil {
			return rep, fmt.Errorf("self-check %s: %w", desc.Platform, err)
		}
		rep.output, _, _ = strings.Cut(out, "\n")
		if !hasWord(out, version) {
			return rep, fmt.Errorf("self-check %s: %s version printed %q, which lacks the --version %q", desc.Platform, binaryPath, out, version)
		}
		rep.ran = desc.Platform.String()
	}
	return rep, nil
}

// checkUser refuses a config User that is empty or names root, by name or id.
func checkUser(user string) error {
	if user == "" || user == "0" || strings.HasPrefix(user, "0:") || strings.HasPrefix(user, "root") {
		return fmt.Errorf("config User %q runs as root", user)
	}
	return nil
}

// hasWord reports whether s contains w delimited by characters that cannot
// be in a tag, so that v1.2 is not found in v1.2.3.
func hasWord(s, w string) bool {
	words := strings.FieldsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.-", r))
	})
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

// runVersion extracts the image's binary into a temporary directory and
// returns what `aisched version` prints there, with the image's env.
func runVersion(ctx context.Context, img v1.Image, env []string) (string, error) {
	dir, err := os.MkdirTemp("", "aisched-image-check-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "aisched")
	if err := extract(img, binaryPath, bin); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "version")
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s version: %w: %s", binaryPath, err, out)
	}
	return string(out), nil
}

// extract copies the regular file at path in img's file system to dst,
// taking it from the topmost layer that has it.
func extract(img v1.Image, path, dst string) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for i := len(layers) - 1; i >= 0; i-- {
		found, err := extractFromLayer(layers[i], strings.TrimPrefix(path, "/"), dst)
		if err != nil || found {
			return err
		}
	}
	return fmt.Errorf("no %s in the image", path)
}

// extractFromLayer copies the regular file name of layer to dst, if it has it.
func extractFromLayer(layer v1.Layer, name, dst string) (bool, error) {
	rc, err := layer.Uncompressed()
	if err != nil {
		return false, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading layer: %w", err)
		}
		if strings.TrimPrefix(hdr.Name, "./") != name {
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			return false, fmt.Errorf("%s in the layer is not a regular file", name)
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
		if err != nil {
			return false, err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return true, err
	}
}

// print writes the digests of the index and its manifests, and what the
// host's binary printed.
func (r checkReport) print(w io.Writer) {
	fmt.Fprintf(w, "index %s\n", r.index)
	for _, m := range r.manifests {
		fmt.Fprintf(w, "  %-12s %s\n", m.Platform, m.Digest)
	}
	if r.ran == "" {
		fmt.Fprintf(w, "image self-check: no image for %s/%s; not run\n", runtime.GOOS, runtime.GOARCH)
		return
	}
	fmt.Fprintf(w, "image self-check: %s version printed %s\n", binaryPath, r.output)
}
