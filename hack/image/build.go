package main

import (
	"bytes"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// source is the repository the image is built from, for its labels.
const source = "https://github.com/aisched/aisched"

// buildIndex assembles the OCI image index of cfg: one image per binary,
// each under its platform, in the order of cfg.binaries.
func buildIndex(cfg config) (v1.ImageIndex, error) {
	certs, err := caBundle()
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range cfg.binaries {
		if err := checkBinary(b); err != nil {
			return nil, err
		}
		img, err := buildImage(cfg, b, certs)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", b.platform, err)
		}
		p := b.platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return idx, nil
}

// buildImage builds the image of one platform: scratch plus one layer
// holding rootFS, run as nonroot.
func buildImage(cfg config, b binary, certs []byte) (v1.Image, error) {
	raw, err := tarLayer(rootFS(b.path, certs), cfg.epoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: cfg.epoch},
			CreatedBy: "hack/image: aisched " + cfg.version + ", CA roots, nonroot user",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: cfg.epoch}
	cf.OS, cf.Architecture, cf.Variant = b.platform.OS, b.platform.Architecture, b.platform.Variant
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonrootID, nonrootID),
		Entrypoint: []string{binaryPath},
		WorkingDir: nonrootHome,
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Labels:     labels(cfg),
	}
	return mutate.ConfigFile(img, cf)
}

// labels returns the OCI annotations every image carries as labels.
func labels(cfg config) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.version":  cfg.version,
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.title":    "aisched",
	}
	if cfg.revision != "" {
		l["org.opencontainers.image.revision"] = cfg.revision
	}
	return l
}
