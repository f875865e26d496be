package collect

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMeasureDiskThroughput(t *testing.T) {
	tests := []struct {
		name    string
		dir     func(t *testing.T) string
		size    int64
		wantErr bool
	}{
		{name: "one MiB", dir: func(t *testing.T) string { return t.TempDir() }, size: 1 << 20},
		// Not a multiple of the write chunk.
		{name: "2.5 MiB", dir: func(t *testing.T) string { return t.TempDir() }, size: 5 << 19},
		{name: "zero size", dir: func(t *testing.T) string { return t.TempDir() }, size: 0, wantErr: true},
		{name: "no such directory", dir: func(t *testing.T) string { return filepath.Join(t.TempDir(), "absent") }, size: 1 << 20, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			got, err := MeasureDiskThroughput(dir, tc.size)
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("error = %v, want error: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			t.Logf("%d bytes: %.1f MB/s", tc.size, got)
			if got <= 0 {
				t.Errorf("throughput = %v MB/s, want > 0", got)
			}
			// The temporary file is gone.
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 {
				t.Errorf("left behind in %s: %v", dir, entries)
			}
		})
	}
}
