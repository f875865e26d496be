package console

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/sim"
	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/whatif"
	"github.com/aisched/aisched/scenarios"
)

// Simulations configure the simulations page: the shipped scenarios that
// need no trace run on the simulator's fast engine, and whatif runs on a
// snapshot of the cluster read with the user's clients, simulated with
// the cluster's own scheduler and shared configurations, so that the
// console answers as `aisched whatif` does for the same cluster.
type Simulations struct {
	// SchedulerConfig is the cluster's scheduler configuration
	// (scheduler.ReadConfig).
	SchedulerConfig *config.KubeSchedulerConfiguration
	// SharedConfig is the cluster's shared configuration
	// (config.ReadShared).
	SharedConfig *aischedconfig.SharedConfiguration
	// WhatIfHorizon is how far whatif looks ahead; default
	// whatif.DefaultHorizon.
	WhatIfHorizon time.Duration
}

// scenarios lists the shipped scenarios that need no trace.
func (*Simulations) scenarios() []Scenario {
	var out []Scenario
	for _, s := range shippedScenarios() {
		out = append(out, Scenario{Name: s.Name, Description: s.Description})
	}
	return out
}

// shippedScenarios are the embedded scenarios that need no trace; one
// that does not load is logged and left out.
func shippedScenarios() []*scenario.Scenario {
	var out []*scenario.Scenario
	files, _ := fs.Glob(scenarios.Files, "*.yaml")
	for _, f := range files {
		data, err := scenarios.Files.ReadFile(f)
		if err == nil {
			var s *scenario.Scenario
			if s, err = scenario.Parse(f, data); err == nil && s.Trace == nil {
				out = append(out, s)
			}
		}
		if err != nil {
			klog.ErrorS(err, "console: a shipped scenario does not load", "file", f)
		}
	}
	return out
}

// runScenario runs a shipped scenario by name.
func (*Simulations) runScenario(ctx context.Context, name string) (*SimReport, error) {
	for _, s := range shippedScenarios() {
		if s.Name != name {
			continue
		}
		rep, err := sim.Run(ctx, s, sim.Options{Parallel: 1})
		if err != nil {
			return nil, err
		}
		rows, err := rep.Rows()
		if err != nil {
			return nil, err
		}
		var svg bytes.Buffer
		if err := rep.WriteSVG(&svg); err != nil {
			return nil, err
		}
		return &SimReport{Title: s.Name, Description: s.Description, Policies: rep.PolicyNames(), Rows: rows, SVG: svg.String()}, nil
	}
	return nil, fmt.Errorf("scenario %.64q: not a shipped scenario", name)
}

// whatIf answers when a job would run, on a snapshot read with the user's
// clients.
func (s *Simulations) whatIf(ctx context.Context, kube kubernetes.Interface, ai versioned.Interface, manifest []byte, namespace string) (*SimReport, error) {
	job, err := whatif.ParseJob("manifest", manifest, namespace)
	if err != nil {
		return nil, err
	}
	snap, err := whatif.Take(ctx, kube, ai)
	if err != nil {
		return nil, err
	}
	ans, err := whatif.Run(ctx, snap, job, whatif.Options{SchedulerConfig: s.SchedulerConfig, SharedConfig: s.SharedConfig, Horizon: s.WhatIfHorizon})
	if err != nil {
		return nil, err
	}
	var text strings.Builder
	if err := ans.WriteText(&text, snap.Taken); err != nil {
		return nil, err
	}
	return &SimReport{Title: "whatif", Text: text.String()}, nil
}
