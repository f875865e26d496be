package config

import (
	"fmt"

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
