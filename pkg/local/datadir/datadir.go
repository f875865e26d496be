// Package datadir checks the data directory of `aisched up` for what
// would otherwise stop it silently: a disk running full, where etcd can no
// longer write, and an etcd database that cannot be read, on which etcd
// panics.
package datadir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// Free disk below which `aisched up` warns, and below which it refuses to
// start or stops: etcd cannot write once the disk is full, and every
// component then fails on its next write.
const (
	LowDiskBytes      = 1 << 30
	CriticalDiskBytes = 100 << 20
	// CheckInterval is how often a running cluster checks its disk.
	CheckInterval = 10 * time.Second
)

// FreeBytes is the space left to an unprivileged writer on the file
// system of path.
func FreeBytes(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// DiskWatch checks the free space of a data dir: it warns once when the
// space runs low (again after it recovered), and fails when the disk is
// nearly full.
type DiskWatch struct {
	Dir string
	// Free measures the space left (FreeBytes).
	Free func(string) (uint64, error)
	// Warn receives the warning.
	Warn   func(string)
	warned bool
}

// Check returns an error when the disk is nearly full, and warns when it
// runs low.
func (d *DiskWatch) Check() error {
	free, err := d.Free(d.Dir)
	if err != nil {
		return nil // A file system that cannot say is not a reason to stop.
	}
	switch {
	case free < CriticalDiskBytes:
		return fmt.Errorf("disk nearly full: %d MiB free for %s, where etcd needs room to write; free some space, then start again", free>>20, d.Dir)
	case free < LowDiskBytes:
		if !d.warned {
			d.warned = true
			d.Warn(fmt.Sprintf("disk running low: %d MiB free for %s; aisched up stops below %d MiB", free>>20, d.Dir, CriticalDiskBytes>>20))
		}
	default:
		d.warned = false
	}
	return nil
}

// Run checks every interval until ctx ends, and calls fail once the disk
// is nearly full.
func (d *DiskWatch) Run(ctx context.Context, interval time.Duration, fail func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := d.Check(); err != nil {
			fail(err)
			return
		}
	}
}

// EtcdDBPath is etcd's database in its data dir.
func EtcdDBPath(etcdDir string) string { return filepath.Join(etcdDir, "member", "snap", "db") }

// CorruptDBError is an etcd database that cannot be read. The way out is
// a backup of the data directory, or a fresh start that discards every
// object.
type CorruptDBError struct {
	Path string
	Err  error
}

func (e *CorruptDBError) Error() string {
	return fmt.Sprintf("etcd database %s cannot be read: %v", e.Path, e.Err)
}

func (e *CorruptDBError) Unwrap() error { return e.Err }

// CheckEtcdDB opens etcd's database read-only and checks its pages before
// etcd does: etcd panics on a corrupt database, which no one reads. It
// returns a CorruptDBError naming the file.
func CheckEtcdDB(etcdDir string) (err error) {
	path := EtcdDBPath(etcdDir)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	corrupt := func(why error) error { return &CorruptDBError{Path: path, Err: why} }
	defer func() {
		if r := recover(); r != nil {
			err = corrupt(fmt.Errorf("%v", r))
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return corrupt(err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() {
			if first == nil {
				first = corrupt(err)
			}
		}
		return first
	})
}
