package version

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
	"sigs.k8s.io/yaml"
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

// The Helm chart runs the image of Release, by its tag: Chart.yaml's
// appVersion (the default tag; values.yaml leaves image.tag empty) and
// its version are the release. test/integration's TestChart checks the
// rendered manifests.
func TestChartPinsRelease(t *testing.T) {
	dir := filepath.Join("..", "..", "charts", "aisched")
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, filepath.Join(dir, "Chart.yaml"), &chart)
	if chart.AppVersion != Release || "v"+chart.Version != Release {
		t.Errorf("Chart.yaml version %s, appVersion %s; want %s for both", chart.Version, chart.AppVersion, Release)
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	readYAML(t, filepath.Join(dir, "values.yaml"), &values)
	if values.Image.Repository != "ghcr.io/aisched/aisched" || values.Image.Tag != "" {
		t.Errorf("values.yaml image %+v, want ghcr.io/aisched/aisched with the chart's appVersion (tag empty)", values.Image)
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
