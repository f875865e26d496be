package aisched_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the import path of this repository.
const module = "github.com/aisched/aisched"

// TestNoUpwardImports checks that the tree reads top-down: no package
// imports a package below a directory whose own package depends on the
// importer (as the job queue once imported pkg/scheduler/gpustate while
// pkg/scheduler imported the job queue), and no library package imports a
// command. Test files are left out: a test may reach anywhere.
func TestNoUpwardImports(t *testing.T) {
	imports := moduleImports(t)
	for from, tos := range imports {
		for _, to := range tos {
			if strings.HasPrefix(to, module+"/cmd/") && !strings.HasPrefix(from, module+"/cmd/") {
				t.Errorf("%s imports the command package %s", rel(from), rel(to))
			}
			for dir := path.Dir(to); strings.HasPrefix(dir, module+"/"); dir = path.Dir(dir) {
				if strings.HasPrefix(from, dir+"/") || from == dir {
					break // from is inside dir: below or beside to, not above
				}
				if _, isPackage := imports[dir]; isPackage && dependsOn(imports, dir, from) {
					t.Errorf("%s imports %s, below %s, which itself depends on %s: move what they share below both", rel(from), rel(to), rel(dir), rel(from))
				}
			}
		}
	}
}

// moduleImports maps each package of the module to the module's packages
// its non-test files import.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "hack" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := path.Join(module, filepath.ToSlash(filepath.Dir(p)))
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, spec := range f.Imports {
			to, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if strings.HasPrefix(to, module+"/") && !slices.Contains(out[pkg], to) {
				out[pkg] = append(out[pkg], to)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dependsOn reports whether from imports to, directly or not.
func dependsOn(imports map[string][]string, from, to string) bool {
	seen := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, next := range imports[p] {
			if next == to {
				return true
			}
			if !seen[next] {
				seen[next] = true
				stack = append(stack, next)
			}
		}
	}
	return false
}

func rel(pkg string) string { return strings.TrimPrefix(pkg, module+"/") }
