package report

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFiles: a matrix's files are its own two in the directory and
// each scenario's four in a subdirectory named after it, each what the
// writer of its format writes.
func TestWriteFiles(t *testing.T) {
	r := testReport()
	m := &Matrix{Reports: []*Report{r}, Base: "default-scheduler", Candidate: "aisched"}
	dir := filepath.Join(t.TempDir(), "out")
	if err := m.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for path, write := range map[string]func(io.Writer) error{
		"matrix.md":           m.WriteMarkdown,
		"matrix.json":         m.WriteJSON,
		"example/report.json": r.WriteJSON,
		"example/report.csv":  r.WriteCSV,
		"example/report.md":   r.WriteMarkdown,
		"example/report.svg":  r.WriteSVG,
	} {
		var want bytes.Buffer
		if err := write(&want); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil {
			t.Error(err)
			continue
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s differs from what its writer writes:\n%s\nwant:\n%s", path, got, want.Bytes())
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "example"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Errorf("%d files in the scenario's directory, want 4", len(entries))
	}
}

// A directory that cannot be made is an error.
func TestWriteFilesError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := testReport().WriteFiles(filepath.Join(file, "out")); err == nil {
		t.Error("WriteFiles under a file: no error")
	}
}
