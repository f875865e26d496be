package aisched_test

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// layoutEntry is a line of the README's layout section that starts with a
// path ("pkg/sim/   `aisched sim`: ..."), with its continuation lines.
type layoutEntry struct {
	dir  string
	text string
}

var layoutPath = regexp.MustCompile(`^([a-z][a-zA-Z0-9_./-]*/)\s`)

// readLayout reads the README's layout section, the fenced block after
// "## Layout".
func readLayout(t *testing.T) []layoutEntry {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no \"## Layout\" section")
	}
	_, block, ok := strings.Cut(section, "```text\n")
	if !ok {
		t.Fatal("README.md's layout section has no ```text block")
	}
	block, _, _ = strings.Cut(block, "```")
	var out []layoutEntry
	for _, line := range strings.Split(block, "\n") {
		if m := layoutPath.FindStringSubmatch(line); m != nil {
			out = append(out, layoutEntry{dir: strings.TrimSuffix(m[1], "/"), text: line[len(m[1]):]})
		} else if len(out) > 0 {
			out[len(out)-1].text += " " + strings.TrimSpace(line)
		}
	}
	return out
}

// TestReadmeLayout checks that the README's layout section matches the
// tree: every directory it lists exists, and every Go package under cmd/,
// apis/ and pkg/ is listed, or named ("sub/") in the entry of a directory
// above it ("plugins/<name>/" names every plugin). Generated clients under
// pkg/generated are exempt.
func TestReadmeLayout(t *testing.T) {
	entries := readLayout(t)
	for _, e := range entries {
		if st, err := os.Stat(e.dir); err != nil || !st.IsDir() {
			t.Errorf("README.md's layout lists %s/, which is not a directory", e.dir)
		}
	}
	covered := func(dir string) bool {
		for _, e := range entries {
			if e.dir == dir {
				return true
			}
			rel, ok := strings.CutPrefix(dir, e.dir+"/")
			if !ok {
				continue
			}
			if strings.Contains(e.text, rel+"/") || strings.Contains(e.text, path.Join(path.Dir(rel), "<name>")+"/") {
				return true
			}
		}
		return false
	}
	for _, root := range []string{"cmd", "apis", "pkg"} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if d.Name() == "testdata" || p == filepath.Join("pkg", "generated") {
				return filepath.SkipDir
			}
			if goFiles, _ := filepath.Glob(filepath.Join(p, "*.go")); len(goFiles) == 0 {
				return nil
			}
			if !covered(filepath.ToSlash(p)) {
				t.Errorf("README.md's layout does not list %s/", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
