package version

import (
	"os"
	"path/filepath"
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
