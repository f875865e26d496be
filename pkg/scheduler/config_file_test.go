package scheduler

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestConfigWithKubeconfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
	none := write("none.yaml", head+"profiles: [{schedulerName: aisched}]\n")
	same := write("same.yaml", head+"clientConnection: {kubeconfig: /k}\n")
	other := write("other.yaml", head+"clientConnection: {kubeconfig: /other}\n")
	broken := write("broken.yaml", head+"profiles: [\n")

	got, remove, err := ConfigWithKubeconfig(none, "/k")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ClientConnection struct{ Kubeconfig string } `json:"clientConnection"`
		Profiles         []map[string]string         `json:"profiles"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if got == none || cfg.ClientConnection.Kubeconfig != "/k" || len(cfg.Profiles) != 1 || cfg.Profiles[0]["schedulerName"] != "aisched" {
		t.Errorf("the copy %s reads %+v, want the file's profiles and kubeconfig /k", got, cfg)
	}
	if _, err := ParseConfig(got, data); err != nil {
		t.Errorf("the copy does not decode: %v", err)
	}
	remove()
	if _, err := os.Stat(got); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the copy is still there after remove: %v", err)
	}

	if got, _, err := ConfigWithKubeconfig(same, "/k"); err != nil || got != same {
		t.Errorf("a file that names the kubeconfig: %q, %v; want the file itself", got, err)
	}
	var conflict *KubeconfigConflictError
	if _, _, err := ConfigWithKubeconfig(other, "/k"); !errors.As(err, &conflict) || conflict.InFile != "/other" || conflict.Given != "/k" {
		t.Errorf("a file that names another kubeconfig: %v, want a KubeconfigConflictError", err)
	}
	if _, _, err := ConfigWithKubeconfig(broken, "/k"); err == nil || !strings.HasPrefix(err.Error(), broken+":3: invalid YAML") {
		t.Errorf("a file that is not YAML: %v, want an error at its line", err)
	}
}
