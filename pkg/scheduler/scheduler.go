// Package scheduler assembles aisched's kube-scheduler: the registry of
// out-of-tree plugins compiled into `aisched scheduler` and the scheduler
// configuration that `aisched up` runs in-process.
package scheduler

import (
	_ "embed"
	"fmt"

	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// AischedProfile is the scheduler name of aisched's profile; pods opt in
// with spec.schedulerName: aisched.
const AischedProfile = "aisched"

//go:embed local-config.yaml
var localConfig []byte

// Registry returns the out-of-tree plugins, one entry per plugin package.
// It is the only place plugins are registered.
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{}
}

// LocalConfig returns the defaulted and validated configuration of the
// in-process scheduler of `aisched up`: profiles default-scheduler and aisched.
func LocalConfig() (*config.KubeSchedulerConfiguration, error) {
	return DecodeConfig(localConfig)
}

// DecodeConfig decodes, defaults and validates a KubeSchedulerConfiguration.
func DecodeConfig(data []byte) (*config.KubeSchedulerConfiguration, error) {
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("want a KubeSchedulerConfiguration, got %s", gvk)
	}
	cfg.APIVersion = gvk.GroupVersion().String()
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}
