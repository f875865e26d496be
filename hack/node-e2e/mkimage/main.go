// Command mkimage writes an image archive, as `docker save` writes one, of
// one static binary at /probe with the given entrypoint, under each of the
// given names, for `ctr images import`: the node end-to-end test's images,
// made without a registry or a Docker daemon.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	binary := flag.String("binary", "", "the static binary to put at /probe")
	out := flag.String("out", "", "the archive to write")
	entrypoint := flag.String("entrypoint", "/probe", "the image's entrypoint, space-separated")
	flag.Parse()
	if err := run(*binary, *out, strings.Fields(*entrypoint), flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(binary, out string, entrypoint, tags []string) error {
	if binary == "" || out == "" || len(tags) == 0 {
		return fmt.Errorf("usage: mkimage -binary FILE -out ARCHIVE [-entrypoint CMD] NAME...")
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "probe", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Config.Entrypoint = entrypoint
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	for _, t := range tags {
		ref, err := name.ParseReference(t)
		if err != nil {
			return err
		}
		refs[ref] = img
	}
	return tarball.MultiRefWriteToFile(out, refs)
}
