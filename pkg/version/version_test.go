package version

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

func TestKubernetesMatchesGoMod(t *testing.T) {
	path := filepath.Join("..", "..", "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == "k8s.io/kubernetes" {
			if r.Mod.Version != Kubernetes {
				t.Errorf("go.mod requires k8s.io/kubernetes %s, version.Kubernetes is %s", r.Mod.Version, Kubernetes)
			}
			return
		}
	}
	t.Error("go.mod does not require k8s.io/kubernetes")
}

// Every manifest in deploy/ runs the image of Release, by its tag.
func TestManifestsPinRelease(t *testing.T) {
	const image = "ghcr.io/aisched/aisched"
	var found int
	err := filepath.WalkDir(filepath.Join("..", "..", "deploy"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			_, ref, ok := strings.Cut(line, "image: ")
			if !ok || !strings.HasPrefix(strings.TrimSpace(ref), image) {
				continue
			}
			found++
			if got := strings.TrimSpace(ref); got != image+":"+Release {
				t.Errorf("%s:%d: image %s, want %s:%s", path, i+1, got, image, Release)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 4 {
		t.Errorf("%d aisched images in deploy/, want one per component (scheduler, agent, controller, gateway)", found)
	}
}
