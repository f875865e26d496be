package trace

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/yaml"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/scheduler/plugins/fgd"
)

// TypicalPods counts the shapes of a pod list as FGD's typicalPods
// argument: each distinct (CPU, share or whole cards, models) with the
// number of pods of that shape as its weight, the most frequent first. It
// is what the FGD paper's simulator learns from the whole workload before
// a replay.
func TypicalPods(pods []Pod) []aischedconfig.FGDTypicalPod {
	type key struct {
		milliCPU, milli, count int64
		models                 string
	}
	counts := map[key]int64{}
	for _, p := range pods {
		k := key{milliCPU: p.MilliCPU}
		switch {
		case p.Shared():
			k.milli, k.count = p.GPUMilli, 1
		case p.NumGPU > 0:
			k.milli, k.count = 1000, int64(p.NumGPU)
		}
		if k.count > 0 && len(p.GPUSpec) > 0 {
			// As tracePod names them to the pods.
			models := make([]string, len(p.GPUSpec))
			for i, m := range p.GPUSpec {
				models[i] = NodeModel(m)
			}
			k.models = strings.Join(models, ",")
		}
		counts[k]++
	}
	out := make([]aischedconfig.FGDTypicalPod, 0, len(counts))
	for k, n := range counts {
		t := aischedconfig.FGDTypicalPod{MilliCPU: k.milliCPU, GPUMilli: k.milli, GPUCount: k.count, Weight: n}
		if k.models != "" {
			t.Models = strings.Split(k.models, ",")
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b aischedconfig.FGDTypicalPod) int {
		return cmp.Or(cmp.Compare(b.Weight, a.Weight), cmp.Compare(a.GPUCount, b.GPUCount), cmp.Compare(a.GPUMilli, b.GPUMilli),
			cmp.Compare(a.MilliCPU, b.MilliCPU), cmp.Compare(strings.Join(a.Models, ","), strings.Join(b.Models, ",")))
	})
	return out
}

// WithTypicalPods returns a copy of cfg in which the FGD plugin of every
// profile has typical as its typicalPods argument, its other arguments
// kept.
func WithTypicalPods(cfg *config.KubeSchedulerConfiguration, typical []aischedconfig.FGDTypicalPod) (*config.KubeSchedulerConfiguration, error) {
	cfg = cfg.DeepCopy()
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		at := slices.IndexFunc(p.PluginConfig, func(pc config.PluginConfig) bool { return pc.Name == fgd.Name })
		if at < 0 {
			p.PluginConfig = append(p.PluginConfig, config.PluginConfig{Name: fgd.Name})
			at = len(p.PluginConfig) - 1
		}
		var args aischedconfig.FGDArgs
		switch o := p.PluginConfig[at].Args.(type) {
		case nil:
		case *runtime.Unknown:
			if err := yaml.UnmarshalStrict(o.Raw, &args); err != nil {
				return nil, fmt.Errorf("profile %s: pluginConfig[%s]: %w", p.SchedulerName, fgd.Name, err)
			}
		default:
			return nil, fmt.Errorf("profile %s: pluginConfig[%s]: unexpected type %T", p.SchedulerName, fgd.Name, o)
		}
		args.TypicalPods = typical
		raw, err := json.Marshal(&args)
		if err != nil {
			return nil, err
		}
		p.PluginConfig[at].Args = &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
	}
	return cfg, nil
}
