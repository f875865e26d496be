// Package scheduler assembles aisched's kube-scheduler: the registry of
// out-of-tree plugins compiled into `aisched scheduler` and the scheduler
// configuration that `aisched up` runs in-process.
package scheduler

import (
	"context"
	_ "embed"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/aisched/aisched/pkg/scheduler/plugins/coscheduling"
	"github.com/aisched/aisched/pkg/scheduler/plugins/fgd"
	"github.com/aisched/aisched/pkg/scheduler/plugins/fgdbaseline"
	"github.com/aisched/aisched/pkg/scheduler/plugins/gpuclaims"
	"github.com/aisched/aisched/pkg/scheduler/plugins/gpufit"
	"github.com/aisched/aisched/pkg/scheduler/plugins/heteropriority"
	"github.com/aisched/aisched/pkg/scheduler/plugins/loadaware"
	"github.com/aisched/aisched/pkg/scheduler/plugins/pccbalance"
	"github.com/aisched/aisched/pkg/util/yamlfile"
)

// Profile names; pods choose one with spec.schedulerName.
const (
	// AischedProfile is aisched's recommended profile for mixed CPU/GPU clusters.
	AischedProfile = "aisched"
	// BinpackProfile packs CPU and GPUs onto as few nodes as possible.
	BinpackProfile = "aisched-binpack"
	// GPUShareProfile places pods that share cards so as to strand the
	// least GPU (FGD, BestFit to break ties).
	GPUShareProfile = "aisched-gpushare"
)

//go:embed local-config.yaml
var localConfig []byte

// Registry returns the out-of-tree plugins, one entry per plugin package,
// each handed the parts of the shared state it uses, started. It is the
// only place plugins are registered. Build it once per scheduler, from one
// Shared, so that every profile shares it.
func Registry(shared *Shared) frameworkruntime.Registry {
	// with starts the shared state before the plugin that needs it is built.
	with := func(f func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error)) frameworkruntime.PluginFactory {
		return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			if err := shared.start(ctx, h); err != nil {
				return nil, err
			}
			return f(ctx, obj, h)
		}
	}
	return frameworkruntime.Registry{
		gpufit.Name: with(func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return gpufit.New(ctx, obj, h, shared.GPUs)
		}),
		gpuclaims.Name: with(func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return gpuclaims.New(ctx, obj, h, shared.GPUs, shared.DRA, shared.Queue)
		}),
		heteropriority.Name: with(func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return heteropriority.New(ctx, obj, h, shared.GPUs)
		}),
		fgdbaseline.BestFitName: with(func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return fgdbaseline.NewBestFit(ctx, obj, h, shared.GPUs)
		}),
		fgdbaseline.DotProdName: with(func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return fgdbaseline.NewDotProd(ctx, obj, h, shared.GPUs)
		}),
		fgd.Name: with(func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return fgd.New(ctx, obj, h, shared.GPUs)
		}),
		loadaware.Name: with(func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return loadaware.New(ctx, obj, h, shared.NodeMetrics, shared.Clock, shared.Workload, shared.GPUs)
		}),
		pccbalance.Name: with(func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return pccbalance.New(ctx, obj, h, shared.Workload, shared.GPUs)
		}),
		coscheduling.Name: with(func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return coscheduling.New(ctx, obj, h, shared.Groups, shared.Queue, shared.GPUs, shared.Clock)
		}),
	}
}

// LocalConfig returns the defaulted and validated configuration of the
// in-process scheduler of `aisched up`: profiles default-scheduler, aisched,
// aisched-binpack, the FGD paper's BestFit, DotProd and FGD, and
// aisched-gpushare.
func LocalConfig() (*config.KubeSchedulerConfiguration, error) {
	return ParseConfig("pkg/scheduler/local-config.yaml", localConfig)
}

// ReadConfig reads a KubeSchedulerConfiguration file (ParseConfig); the
// empty path is LocalConfig. It is how aisched reads every scheduler
// configuration a user gives it (aisched up, sim, whatif, the console).
func ReadConfig(path string) (*config.KubeSchedulerConfiguration, error) {
	if path == "" {
		return LocalConfig()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes (strictly: a misspelt field is an error), defaults
// and validates a KubeSchedulerConfiguration, the file name, as
// kube-scheduler does; each error names the file and, where the field is
// in it, the line: "config.yaml:7: profiles[1].schedulerName: Duplicate
// value: ...".
func ParseConfig(name string, data []byte) (*config.KubeSchedulerConfiguration, error) {
	root, err := yamlfile.Parse(name, data, "a KubeSchedulerConfiguration")
	if err != nil {
		return nil, err
	}
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, yamlfile.Errors(name, root, err)
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("%s: want a KubeSchedulerConfiguration, got %s", name, gvk)
	}
	cfg.APIVersion = gvk.GroupVersion().String()
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, yamlfile.Errors(name, root, err)
	}
	return cfg, nil
}

// DecodeConfig is ParseConfig for a configuration written in code, whose
// errors name it "KubeSchedulerConfiguration".
func DecodeConfig(data []byte) (*config.KubeSchedulerConfiguration, error) {
	return ParseConfig("KubeSchedulerConfiguration", data)
}
