package scheduler

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClusterConfig checks what `aisched scheduler --print-config` prints:
// a configuration that decodes, with aisched's profiles as aisched up runs
// them, without default-scheduler (the cluster's kube-scheduler keeps it).
func TestClusterConfig(t *testing.T) {
	data, err := ClusterConfigYAML()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := DecodeConfig(data)
	if err != nil {
		t.Fatalf("--print-config's output does not decode: %v\n%s", err, data)
	}
	var names []string
	for _, p := range cfg.Profiles {
		names = append(names, p.SchedulerName)
	}
	if diff := cmp.Diff(ClusterProfiles, names); diff != "" {
		t.Errorf("profiles (-want,+got):\n%s", diff)
	}
	local, err := LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ClusterProfiles {
		if diff := cmp.Diff(profile(t, local, name), profile(t, cfg, name)); diff != "" {
			t.Errorf("%s profile (-local,+printed):\n%s", name, diff)
		}
	}
	if cfg.LeaderElection.LeaderElect {
		t.Error("leader election on; want off for one scheduler run from a machine")
	}
	// The comments that say why each setting is there are kept.
	if !strings.Contains(string(data), "# GPUFit filters before NodeResourcesFit") || !strings.Contains(string(data), "--print-config") {
		t.Errorf("the printed configuration lost its comments:\n%s", data)
	}
}
