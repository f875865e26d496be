package scheduler

import (
	"reflect"
	"slices"

	kubescheduler "k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// FindProfile returns the profile of cfg whose schedulerName is name, nil
// when none is.
func FindProfile(cfg *config.KubeSchedulerConfiguration, name string) *config.KubeSchedulerProfile {
	for i := range cfg.Profiles {
		if cfg.Profiles[i].SchedulerName == name {
			return &cfg.Profiles[i]
		}
	}
	return nil
}

// ProfileNames are the schedulerNames of cfg's profiles, in order.
func ProfileNames(cfg *config.KubeSchedulerConfiguration) []string {
	names := make([]string, len(cfg.Profiles))
	for i, p := range cfg.Profiles {
		names[i] = p.SchedulerName
	}
	return names
}

// ExtensionPoint names an extension point as config.Plugins names its
// field: "Filter", "Score", "Permit".
type ExtensionPoint string

// The extension points the simulator and the benchmark ask about.
const (
	Filter ExtensionPoint = "Filter"
	Score  ExtensionPoint = "Score"
	Permit ExtensionPoint = "Permit"
	// PlacementGenerate is where a pod group's candidate placements are
	// made (upstream's TopologyPlacementGenerator).
	PlacementGenerate ExtensionPoint = "PlacementGenerate"
)

// ProfilePlugins returns the plugins that a running scheduler's profile
// runs at each extension point, as its framework lists them: MultiPoint
// expanded into the points each plugin implements, and what the profile
// disables (MultiPoint.Disabled, a point's Disabled, "*") left out. ok is
// false when the scheduler has no such profile.
//
// It reads the framework rather than the configuration because only the
// framework knows which points a MultiPoint plugin joins: that depends on
// the interfaces the plugin's type implements.
func ProfilePlugins(sched *kubescheduler.Scheduler, profile string) (_ *config.Plugins, ok bool) {
	fw, ok := sched.Profiles[profile]
	if !ok {
		return nil, false
	}
	return fw.ListPlugins(), true
}

// RunsPlugin reports whether plugins (ProfilePlugins) run the plugin name
// at point.
func RunsPlugin(plugins *config.Plugins, point ExtensionPoint, name string) bool {
	if plugins == nil {
		return false
	}
	// config.Plugins has one PluginSet field per extension point, named
	// after it.
	field := reflect.ValueOf(plugins).Elem().FieldByName(string(point))
	if !field.IsValid() {
		return false
	}
	set, ok := field.Interface().(config.PluginSet)
	return ok && slices.ContainsFunc(set.Enabled, func(p config.Plugin) bool { return p.Name == name })
}
