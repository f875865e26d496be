package scheduler

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	aischedconfig "github.com/aisched/aisched/apis/config"
	aischedfake "github.com/aisched/aisched/pkg/generated/clientset/versioned/fake"
	"github.com/aisched/aisched/pkg/scheduler/plugins/gpufit"
)

// profilesConfig has profiles that run GPUFit's Filter or do not, written
// the ways a configuration can say so.
const profilesConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
  - schedulerName: multipoint
    plugins:
      multiPoint:
        enabled: [{name: GPUFit}]
  - schedulerName: filter
    plugins:
      filter:
        enabled: [{name: GPUFit}]
  - schedulerName: multipoint-filter-disabled
    plugins:
      multiPoint:
        enabled: [{name: GPUFit}]
      filter:
        disabled: [{name: GPUFit}]
  - schedulerName: multipoint-filter-all-disabled
    plugins:
      multiPoint:
        enabled: [{name: GPUFit}]
      filter:
        disabled: [{name: "*"}]
`

func TestRunsPlugin(t *testing.T) {
	cfg, err := DecodeConfig([]byte(profilesConfig))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	broadcaster := events.NewEventBroadcasterAdapterWithContext(ctx, client)
	defer broadcaster.Shutdown()
	sched, err := Build(ctx, BuildOptions{
		Config:          cfg,
		Shared:          NewSharedWith(aischedconfig.DefaultShared(), clocktesting.NewFakeClock(time.Now()), aischedfake.NewSimpleClientset()),
		Client:          client,
		InformerFactory: informers.NewSharedInformerFactory(client, 0),
		DynamicFactory:  dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, corev1.NamespaceAll, nil),
		Recorders:       func(name string) events.EventRecorderLogger { return broadcaster.NewRecorder(name) },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		profile    string
		wantFilter bool
	}{
		{profile: "default-scheduler"},
		{profile: "multipoint", wantFilter: true},
		{profile: "filter", wantFilter: true},
		{profile: "multipoint-filter-disabled"},
		{profile: "multipoint-filter-all-disabled"},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			if FindProfile(cfg, tc.profile) == nil {
				t.Fatalf("FindProfile(%q) = nil", tc.profile)
			}
			plugins, ok := ProfilePlugins(sched, tc.profile)
			if !ok {
				t.Fatalf("ProfilePlugins(%q): no such profile", tc.profile)
			}
			if got := RunsPlugin(plugins, Filter, gpufit.Name); got != tc.wantFilter {
				t.Errorf("runs GPUFit at Filter: %t, want %t (filter plugins %v)", got, tc.wantFilter, plugins.Filter.Enabled)
			}
		})
	}
	if _, ok := ProfilePlugins(sched, "missing"); ok {
		t.Error("ProfilePlugins found a profile the configuration does not have")
	}
	if FindProfile(cfg, "missing") != nil {
		t.Error("FindProfile found a profile the configuration does not have")
	}
	plugins, _ := ProfilePlugins(sched, "multipoint")
	if RunsPlugin(plugins, "NoSuchPoint", gpufit.Name) {
		t.Error("RunsPlugin answered true for an extension point that does not exist")
	}
}
