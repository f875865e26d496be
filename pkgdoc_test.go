// Package aisched_test checks repository-wide conventions.
package aisched_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs checks that every package has a doc comment, so that
// `go doc` and the tree explain the architecture (after
// tailscale's pkgdoc_test.go). Generated clients under pkg/generated are exempt.
func TestPackageDocs(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "hack" || name == "bin" || path == filepath.Join("pkg", "generated")) {
			return filepath.SkipDir
		}
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		documented := map[string]bool{}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				return err
			}
			documented[f.Name.Name] = documented[f.Name.Name] || (f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "")
		}
		for name, ok := range documented {
			if !ok {
				t.Errorf("package %s in %s has no package doc comment", name, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
