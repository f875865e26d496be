package report

import (
	"io"
	"os"
	"path/filepath"
)

// WriteFiles writes the report in every format to the directory dir,
// which it creates: report.json, report.csv, report.md and report.svg.
func (r *Report) WriteFiles(dir string) error {
	return writeFiles(dir, map[string]func(io.Writer) error{
		"report.json": r.WriteJSON, "report.csv": r.WriteCSV, "report.md": r.WriteMarkdown, "report.svg": r.WriteSVG,
	})
}

// WriteFiles writes matrix.md and matrix.json to the directory dir, which
// it creates, and each scenario's report files (Report.WriteFiles) to a
// subdirectory named after the scenario.
func (m *Matrix) WriteFiles(dir string) error {
	for _, r := range m.Reports {
		if err := r.WriteFiles(filepath.Join(dir, r.Scenario)); err != nil {
			return err
		}
	}
	return writeFiles(dir, map[string]func(io.Writer) error{"matrix.md": m.WriteMarkdown, "matrix.json": m.WriteJSON})
}

// writeFiles creates dir and writes each file in it with its writer.
func writeFiles(dir string, files map[string]func(io.Writer) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, write := range files {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
