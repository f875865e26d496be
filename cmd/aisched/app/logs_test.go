package app

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLogToFileRestoresStderr: a command that does not keep the terminal
// logToFile returns (whatif) gets its stderr back when done, however long
// it ran: collected, the terminal's file must not close the descriptor
// saved for that (whatif's errors went to the log, /dev/null, and it
// exited 1 with nothing on the terminal).
func TestLogToFileRestoresStderr(t *testing.T) {
	var before, after unix.Stat_t
	if err := unix.Fstat(2, &before); err != nil {
		t.Fatal(err)
	}
	_, done, err := logToFile(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	done()
	if err := unix.Fstat(2, &after); err != nil {
		t.Fatal(err)
	}
	if before.Dev != after.Dev || before.Ino != after.Ino {
		t.Errorf("stderr is inode %d of device %d after done, want %d of %d (the terminal's)", after.Ino, after.Dev, before.Ino, before.Dev)
	}
}
