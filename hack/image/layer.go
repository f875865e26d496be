package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Paths and ids of the image's root file system.
const (
	binaryPath  = "/usr/local/bin/aisched"
	caPath      = "/etc/ssl/certs/ca-certificates.crt"
	nonrootHome = "/home/nonroot"
	nonrootID   = 65532
)

const passwd = `root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532::/home/nonroot:/sbin/nologin
`

const group = `root:x:0:
nonroot:x:65532:
`

// entry is one file or directory of the layer.
type entry struct {
	name string // absolute path
	mode int64  // permission bits, with sticky bit
	uid  int    // uid and gid alike
	dir  bool
	data []byte // a file's contents, unless src is set
	src  string // a file's contents: the file at this path
}

// rootFS lists the image's whole file system: the aisched binary read from
// binPath, the PEM roots certs, the users, and every parent directory.
func rootFS(binPath string, certs []byte) []entry {
	dir := func(name string, mode int64, uid int) entry {
		return entry{name: name, mode: mode, uid: uid, dir: true}
	}
	return []entry{
		dir("/etc", 0o755, 0),
		{name: "/etc/group", mode: 0o644, data: []byte(group)},
		{name: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		dir("/etc/ssl", 0o755, 0),
		dir("/etc/ssl/certs", 0o755, 0),
		{name: caPath, mode: 0o644, data: certs},
		dir("/home", 0o755, 0),
		dir(nonrootHome, 0o755, nonrootID),
		dir("/root", 0o700, 0),
		dir("/tmp", 0o1777, 0),
		dir("/usr", 0o755, 0),
		dir("/usr/local", 0o755, 0),
		dir("/usr/local/bin", 0o755, 0),
		{name: binaryPath, mode: 0o755, src: binPath},
	}
}

// tarLayer writes entries as an uncompressed tar, the same bytes for the
// same input: entries sorted by name, owned by their uid and gid, every
// mtime set to mtime, and nothing taken from the build machine but the
// contents of src files.
func tarLayer(entries []entry, mtime time.Time) ([]byte, error) {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := writeEntry(tw, e, mtime); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

// writeEntry writes one entry: a header and, for a file, its contents.
func writeEntry(tw *tar.Writer, e entry, mtime time.Time) error {
	hdr := &tar.Header{
		Name:    strings.TrimPrefix(e.name, "/"),
		Mode:    e.mode,
		Uid:     e.uid,
		Gid:     e.uid,
		ModTime: mtime,
	}
	if e.dir {
		hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		return tw.WriteHeader(hdr)
	}
	hdr.Typeflag = tar.TypeReg
	var r io.Reader = bytes.NewReader(e.data)
	hdr.Size = int64(len(e.data))
	if e.src != "" {
		f, err := os.Open(e.src)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		r, hdr.Size = f, fi.Size()
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	// A file that changed size since Stat fails here or in the next header.
	_, err := io.Copy(tw, r)
	return err
}
