package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// refNameAnnotation names an image in an OCI image layout's index.json.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// writeLayout writes idx as the OCI image layout dir: its index.json lists
// idx alone, annotated with refNameAnnotation = version. The layout is
// written beside dir and renamed into place; an existing layout at dir is
// replaced, anything else there is refused.
func writeLayout(dir string, idx v1.ImageIndex, version string) error {
	if err := replaceable(dir); err != nil {
		return err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(parent, ".image-*")
	if err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err == nil {
		err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: version}))
	}
	if err == nil {
		err = normalizeModes(tmp)
	}
	if err == nil {
		err = os.RemoveAll(dir)
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		return fmt.Errorf("--out %s: writing the OCI image layout: %w", dir, err)
	}
	return nil
}

// normalizeModes makes every directory under root 0755 and every file 0644:
// MkdirTemp and the layout writer leave some 0700, 0600 or 0777, which would
// keep the layout from other users (a CI container, skopeo run as another
// uid).
func normalizeModes(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(path, mode)
	})
}

// replaceable refuses a dir that exists and is neither empty nor an OCI
// image layout.
func replaceable(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || err == nil && len(entries) == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("--out %s: exists and is not an OCI image layout; not replacing it", dir)
	}
	return nil
}

// push pushes idx, its images and their blobs to repository:version with
// the credentials of the Docker config (docker login) and credential
// helpers, and returns the tag.
func push(ctx context.Context, repository, version string, idx v1.ImageIndex) (name.Tag, error) {
	tag, err := name.NewTag(repository+":"+version, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("--push: %w", err)
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Tag{}, fmt.Errorf("--push %s: %w", tag, err)
	}
	return tag, nil
}
