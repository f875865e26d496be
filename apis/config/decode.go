package config

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Args is implemented by every args type of this package.
type Args interface {
	// Default fills the fields the configuration left empty.
	Default()
	// Validate checks the defaulted arguments; paths are relative to args.
	Validate(path *field.Path) field.ErrorList
}

// Decode reads the plugin's pluginConfig arguments (nil when absent) into
// args, defaults and validates them. Unknown fields are errors.
func Decode(plugin string, obj runtime.Object, args Args) error {
	path := field.NewPath("pluginConfig").Key(plugin).Child("args")
	switch o := obj.(type) {
	case nil:
	case *runtime.Unknown:
		if err := movedField(path, plugin, o.Raw); err != nil {
			return err
		}
		// Strict, unlike frameworkruntime.DecodeInto: a misspelt field is an
		// error, not a silent default.
		if err := yaml.UnmarshalStrict(o.Raw, args); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	default:
		return fmt.Errorf("%s: unexpected type %T", path, obj)
	}
	args.Default()
	return args.Validate(path).ToAggregate()
}

// moved are plugin arguments that configured scheduler-wide state and now
// belong to the shared configuration (SharedConfiguration), by plugin and
// argument: where they went.
var moved = map[string]map[string]string{
	"GPUFit": {"useFeatureDiscoveryLabels": "gpus.useFeatureDiscoveryLabels"},
	"Coscheduling": {
		"backoffSeconds":    "jobQueue.backoffSeconds",
		"maxBackoffSeconds": "jobQueue.maxBackoffSeconds",
		"backfill":          "jobQueue.backfill",
	},
}

// movedField returns an error naming the new home of an argument that
// moved to the shared configuration, nil when raw has none.
func movedField(path *field.Path, plugin string, raw []byte) error {
	fields := moved[plugin]
	if len(fields) == 0 {
		return nil
	}
	var m map[string]interface{}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil // the strict decode names the error
	}
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		to := fields[name]
		if _, ok := m[name]; ok {
			errs = append(errs, field.Invalid(path.Child(name), m[name],
				fmt.Sprintf("moved to the shared configuration (%s, kind %s): one value serves every profile", to, SharedKind)))
		}
	}
	return errs.ToAggregate()
}
