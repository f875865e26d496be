package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func TestDiskWatch(t *testing.T) {
	free := uint64(10 << 30)
	var warnings []string
	d := &DiskWatch{Dir: "/data", Free: func(string) (uint64, error) { return free, nil }, Warn: func(s string) { warnings = append(warnings, s) }}
	step := func(bytes uint64) error {
		free = bytes
		return d.Check()
	}
	for _, b := range []uint64{10 << 30, 900 << 20, 800 << 20} {
		if err := step(b); err != nil {
			t.Fatalf("%d MiB free: %v", b>>20, err)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "900 MiB free for /data") {
		t.Errorf("warnings %q, want one, when the disk ran low", warnings)
	}
	_ = step(2 << 30)
	_ = step(500 << 20)
	if len(warnings) != 2 {
		t.Errorf("warnings %q, want a second one after the disk recovered and ran low again", warnings)
	}
	if err := step(50 << 20); err == nil || !strings.Contains(err.Error(), "disk nearly full: 50 MiB free for /data") {
		t.Errorf("50 MiB free: %v, want the disk nearly full", err)
	}
}

func TestCheckEtcdDB(t *testing.T) {
	dir := t.TempDir()
	if err := CheckEtcdDB(dir); err != nil {
		t.Errorf("no database yet: %v", err)
	}
	path := EtcdDBPath(dir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("key"))
		if err != nil {
			return err
		}
		for i := range 2000 {
			if err := b.Put([]byte(strings.Repeat("k", 10)+string(rune('a'+i%26))+strings.Repeat("x", i%50)), make([]byte, 100)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := CheckEtcdDB(dir); err != nil {
		t.Fatalf("a sound database: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Scribble over everything after the two meta pages.
	for i := 2 * os.Getpagesize(); i < len(data); i++ {
		data[i] = 0xff
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	err = CheckEtcdDB(dir)
	var corrupt *CorruptDBError
	if !errors.As(err, &corrupt) || corrupt.Path != path || !strings.Contains(err.Error(), path) {
		t.Errorf("a corrupt database: %v, want a CorruptDBError naming it", err)
	}
	if err := os.WriteFile(path, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckEtcdDB(dir); err == nil {
		t.Error("a file that is no database passes")
	}
}
