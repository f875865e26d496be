package scheduler

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/aisched/aisched/pkg/util/yamlfile"
)

// KubeconfigConflictError is a configuration file whose
// clientConnection.kubeconfig names another kubeconfig than the one given.
type KubeconfigConflictError struct {
	File, InFile, Given string
}

func (e *KubeconfigConflictError) Error() string {
	return fmt.Sprintf("%s: clientConnection.kubeconfig is %s, not %s", e.File, e.InFile, e.Given)
}

// ConfigWithKubeconfig returns the path of a KubeSchedulerConfiguration
// file whose clientConnection.kubeconfig is kubeconfig: a copy of the
// file at path with it set when the file sets none, path itself when the
// file sets that one, a KubeconfigConflictError when it sets another.
// kube-scheduler's own command ignores its --kubeconfig flag when a
// configuration file is given; `aisched scheduler` honours both through
// this. remove deletes the copy (it does nothing for path itself).
func ConfigWithKubeconfig(path, kubeconfig string) (_ string, remove func(), err error) {
	noop := func() {}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", noop, fmt.Errorf("scheduler config: %w", err)
	}
	if _, err := yamlfile.Parse(path, data, "a KubeSchedulerConfiguration"); err != nil {
		return "", noop, err
	}
	var cfg map[string]interface{}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return "", noop, fmt.Errorf("%s: %w", path, err)
	}
	conn, _ := cfg["clientConnection"].(map[string]interface{})
	if conn == nil {
		conn = map[string]interface{}{}
	}
	switch set, _ := conn["kubeconfig"].(string); set {
	case "":
		conn["kubeconfig"] = kubeconfig
	case kubeconfig:
		return path, noop, nil
	default:
		return "", noop, &KubeconfigConflictError{File: path, InFile: set, Given: kubeconfig}
	}
	cfg["clientConnection"] = conn
	merged, err := yaml.Marshal(cfg)
	if err != nil {
		return "", noop, err
	}
	f, err := os.CreateTemp("", "aisched-scheduler-config-*.yaml")
	if err != nil {
		return "", noop, err
	}
	remove = func() { os.Remove(f.Name()) }
	_, err = f.Write(merged)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		remove()
		return "", noop, err
	}
	return f.Name(), remove, nil
}
