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

func TestCheckConfigKind(t *testing.T) {
	for _, tc := range []struct {
		name, data, wantErr string
	}{
		{"a KubeSchedulerConfiguration", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n", ""},
		{"helm template's ConfigMap", "---\n# Source: aisched/templates/scheduler/configmap.yaml\napiVersion: v1\nkind: ConfigMap\ndata: {scheduler-config.yaml: x}\n",
			"a ConfigMap (as helm template prints the chart's), not the KubeSchedulerConfiguration in it; aisched scheduler --print-config writes aisched's"},
		{"another kind", "apiVersion: v1\nkind: Pod\n", "a Pod: want a KubeSchedulerConfiguration"},
		{"no kind", "profiles: []\n", "no kind: want a KubeSchedulerConfiguration"},
		{"not YAML", "{{", "yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckConfigKind([]byte(tc.data))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("CheckConfigKind = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
