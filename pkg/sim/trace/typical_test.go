package trace

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	aischedconfig "github.com/aisched/aisched/apis/config"
)

func TestTypicalPods(t *testing.T) {
	pods := []Pod{
		{Name: "a", MilliCPU: 4000, NumGPU: 1, GPUMilli: 500},
		{Name: "b", MilliCPU: 4000, NumGPU: 1, GPUMilli: 500},
		{Name: "c", MilliCPU: 4000, NumGPU: 1, GPUMilli: 500, GPUSpec: []string{"T4"}},
		{Name: "d", MilliCPU: 8000, NumGPU: 2, GPUMilli: 1000},
		{Name: "e", MilliCPU: 8000, NumGPU: 2, GPUMilli: 1000},
		{Name: "f", MilliCPU: 2000},
		// A gpu_spec on a CPU pod is moot, as tracePod drops it.
		{Name: "g", MilliCPU: 2000, GPUSpec: []string{"T4"}},
	}
	// Most frequent first; equal weights by cards, then share, then CPU.
	want := []aischedconfig.FGDTypicalPod{
		{MilliCPU: 2000, Weight: 2},
		{MilliCPU: 4000, GPUMilli: 500, GPUCount: 1, Weight: 2},
		{MilliCPU: 8000, GPUMilli: 1000, GPUCount: 2, Weight: 2},
		{MilliCPU: 4000, GPUMilli: 500, GPUCount: 1, Models: []string{"Tesla-T4"}, Weight: 1},
	}
	if diff := cmp.Diff(want, TypicalPods(pods)); diff != "" {
		t.Errorf("TypicalPods (-want,+got):\n%s", diff)
	}
}

// The shapes go into every profile's FGD arguments, the other arguments
// kept, and the configuration given is not changed.
func TestWithTypicalPods(t *testing.T) {
	cfg := &config.KubeSchedulerConfiguration{Profiles: []config.KubeSchedulerProfile{
		{SchedulerName: "FGD", PluginConfig: []config.PluginConfig{{Name: "FGD", Args: &runtime.Unknown{Raw: []byte(`{"window":100}`)}}}},
		{SchedulerName: "other"},
	}}
	typical := []aischedconfig.FGDTypicalPod{{MilliCPU: 1000, GPUMilli: 300, GPUCount: 1, Weight: 5}}
	got, err := WithTypicalPods(cfg, typical)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []aischedconfig.FGDArgs{
		{Window: 100, CoveragePercent: 95, Resolution: aischedconfig.FGDPaper, TypicalPods: typical},
		{Window: 5000, CoveragePercent: 95, Resolution: aischedconfig.FGDPaper, TypicalPods: typical},
	} {
		pc := got.Profiles[i].PluginConfig
		var args aischedconfig.FGDArgs
		if err := aischedconfig.Decode("FGD", pc[len(pc)-1].Args, &args); err != nil {
			t.Fatalf("profile %d: %v", i, err)
		}
		if diff := cmp.Diff(want, args); diff != "" {
			t.Errorf("profile %d args (-want,+got):\n%s", i, diff)
		}
	}
	if len(cfg.Profiles[1].PluginConfig) != 0 || string(cfg.Profiles[0].PluginConfig[0].Args.(*runtime.Unknown).Raw) != `{"window":100}` {
		t.Errorf("the configuration given was changed: %+v", cfg.Profiles)
	}
	cfg.Profiles[0].PluginConfig[0].Args = &runtime.Unknown{Raw: []byte(`{"windw":100}`)}
	if _, err := WithTypicalPods(cfg, typical); err == nil {
		t.Error("a misspelt FGD argument was accepted")
	}
}
