package scheduler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"sigs.k8s.io/yaml"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/scheduler/plugins/coscheduling"
	"github.com/aisched/aisched/pkg/scheduler/plugins/fgd"
	"github.com/aisched/aisched/pkg/scheduler/plugins/fgdbaseline"
	"github.com/aisched/aisched/pkg/scheduler/plugins/gpuclaims"
	"github.com/aisched/aisched/pkg/scheduler/plugins/gpufit"
	"github.com/aisched/aisched/pkg/scheduler/plugins/heteropriority"
	"github.com/aisched/aisched/pkg/scheduler/plugins/loadaware"
	"github.com/aisched/aisched/pkg/scheduler/plugins/pccbalance"
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
	if diff := cmp.Diff([]string{"default-scheduler", AischedProfile, BinpackProfile, "BestFit", "DotProd", "FGD", GPUShareProfile}, names); diff != "" {
		t.Errorf("profiles (-want,+got):\n%s", diff)
	}
	if cfg.LeaderElection.LeaderElect {
		t.Error("the in-process scheduler must not use leader election")
	}
}

// chartDir is the Helm chart, which ships the configuration of
// aisched-scheduler on a real cluster.
var chartDir = filepath.Join("..", "..", "charts", "aisched")

// The chart's default shared configuration (scheduler.shared of
// values.yaml) is the default that `aisched up` runs with.
func TestChartSharedIsDefaults(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Scheduler struct {
			Shared map[string]any `json:"shared"`
		} `json:"scheduler"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	shared, err := yaml.Marshal(values.Scheduler.Shared)
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := aischedconfig.DecodeShared(ktesting.NewLogger(t, ktesting.NewConfig()), "the chart's shared-config.yaml",
		append([]byte("apiVersion: config.aisched.io/v1alpha1\nkind: SharedConfiguration\n"), shared...))
	if err != nil {
		t.Fatalf("scheduler.shared of values.yaml: %v", err)
	}
	if diff := cmp.Diff(aischedconfig.DefaultShared(), shipped); diff != "" {
		t.Errorf("chart's shared configuration (-defaults,+chart):\n%s", diff)
	}
}

// The aisched profiles of `aisched up` and those the chart ships
// (files/scheduler-profiles.yaml, used unless scheduler.profiles is set)
// must not drift apart. The chart's rendering of them is tested against a
// cluster in test/integration (TestChart).
func TestChartProfilesMatchLocal(t *testing.T) {
	profiles, err := os.ReadFile(filepath.Join(chartDir, "files", "scheduler-profiles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	doc.WriteString("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n")
	for line := range strings.Lines(string(profiles)) {
		doc.WriteString("  " + line)
	}
	shipped, err := DecodeConfig([]byte(doc.String()))
	if err != nil {
		t.Fatalf("chart's profiles: %v", err)
	}
	local, err := LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(shipped.Profiles) != 3 {
		t.Errorf("chart's profiles: %d, want aisched's three", len(shipped.Profiles))
	}
	for _, name := range []string{AischedProfile, BinpackProfile, GPUShareProfile} {
		if diff := cmp.Diff(profile(t, local, name), profile(t, shipped, name)); diff != "" {
			t.Errorf("%s profile (-local,+chart):\n%s", name, diff)
		}
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

// Every plugin the shipped configurations (the profiles and each plugin's
// example) name is either upstream's or in Registry, and every argument
// they give our plugins decodes.
func TestConfigsUseKnownPlugins(t *testing.T) {
	local, err := LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	checkPlugins(t, local)
	examples, err := filepath.Glob(filepath.Join("plugins", "*", "example-config.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no example configurations: %v", err)
	}
	for _, path := range examples {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := DecodeConfig(data)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		checkPlugins(t, cfg)
	}
}

func checkPlugins(t *testing.T, cfg *config.KubeSchedulerConfiguration) {
	t.Helper()
	inTree := plugins.NewInTreeRegistry()
	ours := Registry(NewShared(aischedconfig.DefaultShared()))
	for _, p := range cfg.Profiles {
		for _, set := range []config.PluginSet{p.Plugins.MultiPoint, p.Plugins.Score, p.Plugins.Filter, p.Plugins.Bind} {
			for _, pl := range append(set.Enabled, set.Disabled...) {
				if _, ok := inTree[pl.Name]; !ok && ours[pl.Name] == nil && pl.Name != "*" {
					t.Errorf("profile %s names unknown plugin %q", p.SchedulerName, pl.Name)
				}
			}
		}
		for _, pc := range p.PluginConfig {
			var args aischedconfig.Args
			switch pc.Name {
			case pccbalance.Name:
				args = &aischedconfig.PCCBalanceArgs{}
			case heteropriority.Name:
				args = &aischedconfig.HeteroPriorityArgs{}
			case gpufit.Name:
				args = &aischedconfig.GPUFitArgs{}
			case gpuclaims.Name:
				args = &aischedconfig.GPUClaimsArgs{}
			case fgdbaseline.BestFitName, fgdbaseline.DotProdName:
				args = &aischedconfig.FGDBaselineArgs{}
			case fgd.Name:
				args = &aischedconfig.FGDArgs{}
			case coscheduling.Name:
				args = &aischedconfig.CoschedulingArgs{}
			case loadaware.Name:
				args = &aischedconfig.LoadAwareArgs{}
			default:
				continue
			}
			if err := aischedconfig.Decode(pc.Name, pc.Args, args); err != nil {
				t.Errorf("profile %s: %v", p.SchedulerName, err)
			}
		}
	}
}

// Upstream's opportunistic batching is off for a whole profile when one
// of its PreFilter, Filter, PreScore or Score plugins does not sign pods.
func TestPluginsSignPods(t *testing.T) {
	plugins := map[string]fwk.Plugin{
		gpufit.Name:             &gpufit.GPUFit{},
		gpuclaims.Name:          &gpuclaims.GPUClaims{},
		heteropriority.Name:     &heteropriority.HeteroPriority{},
		fgdbaseline.BestFitName: &fgdbaseline.BestFit{},
		fgdbaseline.DotProdName: &fgdbaseline.DotProd{},
		fgd.Name:                &fgd.FGD{},
		loadaware.Name:          &loadaware.LoadAware{},
		pccbalance.Name:         &pccbalance.PCCBalance{},
		coscheduling.Name:       &coscheduling.Coscheduling{},
	}
	for name := range Registry(NewShared(aischedconfig.DefaultShared())) {
		pl, ok := plugins[name]
		if !ok {
			t.Errorf("plugin %s: add it to this test", name)
			continue
		}
		_, preFilter := pl.(fwk.PreFilterPlugin)
		_, filter := pl.(fwk.FilterPlugin)
		_, preScore := pl.(fwk.PreScorePlugin)
		_, score := pl.(fwk.ScorePlugin)
		if _, signs := pl.(fwk.SignPlugin); (preFilter || filter || preScore || score) && !signs {
			t.Errorf("plugin %s filters or scores but does not sign pods: batching is off for its profiles", name)
		}
	}
}

func TestReadConfig(t *testing.T) {
	cfg, err := ReadConfig("")
	if err != nil {
		t.Fatalf("the built-in configuration: %v", err)
	}
	if len(cfg.Profiles) != 7 {
		t.Fatalf("the built-in configuration has %d profiles, want 7", len(cfg.Profiles))
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 200\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadConfig(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "percentageOfNodesToScore") {
		t.Errorf("invalid file: %v, want an error naming the file and the field", err)
	}
	if _, err := ReadConfig(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("a missing file read without error")
	}
}
