package scheduler

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
)

func TestLocalConfig(t *testing.T) {
	cfg, err := LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range cfg.Profiles {
		names = append(names, p.SchedulerName)
	}
	if diff := cmp.Diff([]string{"default-scheduler", AischedProfile}, names); diff != "" {
		t.Errorf("profiles (-want,+got):\n%s", diff)
	}
	if cfg.LeaderElection.LeaderElect {
		t.Error("the in-process scheduler must not use leader election")
	}
}

// The aisched profile of `aisched up` and of the shipped out-of-process
// configuration must not drift apart.
func TestShippedConfigMatchesLocal(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "scheduler", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := DecodeConfig(data)
	if err != nil {
		t.Fatalf("shipped config: %v", err)
	}
	local, err := LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(profile(t, local, AischedProfile), profile(t, shipped, AischedProfile)); diff != "" {
		t.Errorf("aisched profile (-local,+shipped):\n%s", diff)
	}
}

func profile(t *testing.T, cfg *config.KubeSchedulerConfiguration, name string) config.KubeSchedulerProfile {
	t.Helper()
	for _, p := range cfg.Profiles {
		if p.SchedulerName == name {
			return p
		}
	}
	t.Fatalf("no profile %q", name)
	return config.KubeSchedulerProfile{}
}

func TestDecodeConfigErrors(t *testing.T) {
	for _, in := range []string{
		"apiVersion: v1\nkind: Pod\n",
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: a\n- schedulerName: a\n",
		"{",
	} {
		if _, err := DecodeConfig([]byte(in)); err == nil {
			t.Errorf("DecodeConfig(%q) succeeded, want an error", in)
		}
	}
}
