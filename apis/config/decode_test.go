package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func raw(s string) runtime.Object {
	return &runtime.Unknown{Raw: []byte(s), ContentType: runtime.ContentTypeJSON}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		plugin  string
		obj     runtime.Object
		args    Args
		want    Args
		wantErr string
	}{
		{name: "baseline defaults", plugin: "BestFit", args: &FGDBaselineArgs{},
			want: &FGDBaselineArgs{MaxMilliCPU: 128000, MaxGPUs: 8}},
		{name: "baseline negative", plugin: "DotProd", obj: raw(`{"maxGPUs":-1}`), args: &FGDBaselineArgs{},
			wantErr: "pluginConfig[DotProd].args.maxGPUs: Invalid value"},
		{name: "FGD typical pods, a share's count defaulted", plugin: "FGD",
			obj:  raw(`{"typicalPods":[{"milliCPU":4000,"gpuMilli":500,"weight":3},{"gpuMilli":1000,"gpuCount":2,"models":["V100"],"weight":1}]}`),
			args: &FGDArgs{},
			want: &FGDArgs{Window: 5000, CoveragePercent: 95, Resolution: FGDPaper, TypicalPods: []FGDTypicalPod{
				{MilliCPU: 4000, GPUMilli: 500, GPUCount: 1, Weight: 3},
				{GPUMilli: 1000, GPUCount: 2, Models: []string{"V100"}, Weight: 1}}}},
		{name: "FGD typical memory share, its count defaulted", plugin: "FGD",
			obj:  raw(`{"typicalPods":[{"milliCPU":2000,"gpuMemMiB":4000,"weight":2},{"gpuMilli":300,"gpuMemMiB":8000,"weight":1}]}`),
			args: &FGDArgs{},
			want: &FGDArgs{Window: 5000, CoveragePercent: 95, Resolution: FGDPaper, TypicalPods: []FGDTypicalPod{
				{MilliCPU: 2000, GPUMemMiB: 4000, GPUCount: 1, Weight: 2},
				{GPUMilli: 300, GPUMemMiB: 8000, GPUCount: 1, Weight: 1}}}},
		{name: "FGD typical memory share of whole cards", plugin: "FGD", obj: raw(`{"typicalPods":[{"gpuMilli":1000,"gpuCount":1,"gpuMemMiB":4000,"weight":1}]}`), args: &FGDArgs{},
			wantErr: "pluginConfig[FGD].args.typicalPods[0].gpuMemMiB: Invalid value: 4000"},
		{name: "FGD typical negative memory share", plugin: "FGD", obj: raw(`{"typicalPods":[{"gpuMemMiB":-1,"weight":1}]}`), args: &FGDArgs{},
			wantErr: "pluginConfig[FGD].args.typicalPods[0].gpuMemMiB: Invalid value: -1"},
		{name: "FGD typical memory share of two cards", plugin: "FGD", obj: raw(`{"typicalPods":[{"gpuMemMiB":4000,"gpuCount":2,"weight":1}]}`), args: &FGDArgs{},
			wantErr: "pluginConfig[FGD].args.typicalPods[0].gpuCount: Invalid value: 2"},
		{name: "FGD typical pod without weight", plugin: "FGD", obj: raw(`{"typicalPods":[{"gpuMilli":500}]}`), args: &FGDArgs{},
			wantErr: "pluginConfig[FGD].args.typicalPods[0].weight: Invalid value: 0"},
		{name: "FGD typical share of two cards", plugin: "FGD", obj: raw(`{"typicalPods":[{"gpuMilli":500,"gpuCount":2,"weight":1}]}`), args: &FGDArgs{},
			wantErr: "pluginConfig[FGD].args.typicalPods[0].gpuCount: Invalid value: 2"},
		{name: "FGD typical CPU pod with models", plugin: "FGD", obj: raw(`{"typicalPods":[{"milliCPU":1000,"models":["T4"],"weight":1}]}`), args: &FGDArgs{},
			wantErr: "pluginConfig[FGD].args.typicalPods[0].models: Invalid value"},
		{name: "FGD typical more than a card", plugin: "FGD", obj: raw(`{"typicalPods":[{"gpuMilli":1500,"weight":1}]}`), args: &FGDArgs{},
			wantErr: "pluginConfig[FGD].args.typicalPods[0].gpuMilli: Invalid value: 1500"},
		{name: "PCC defaults", plugin: "PCCBalance", args: &PCCBalanceArgs{},
			want: &PCCBalanceArgs{Mode: PCCBalanceSigned, Resources: DefaultPCCResources, CPUPodsOnGPUNodes: CPUPodsOnGPUNodesAlways}},
		{name: "PCC abs with two resources", plugin: "PCCBalance", obj: raw(`{"mode":"abs","resources":["cpu","nvidia.com/gpu"]}`), args: &PCCBalanceArgs{},
			want: &PCCBalanceArgs{Mode: PCCBalanceAbs, Resources: []string{"cpu", "nvidia.com/gpu"}, CPUPodsOnGPUNodes: CPUPodsOnGPUNodesAlways}},
		{name: "PCC bad mode", plugin: "PCCBalance", obj: raw(`{"mode":"square"}`), args: &PCCBalanceArgs{},
			wantErr: `pluginConfig[PCCBalance].args.mode: Unsupported value: "square"`},
		{name: "PCC one resource", plugin: "PCCBalance", obj: raw(`{"resources":["cpu"]}`), args: &PCCBalanceArgs{},
			wantErr: "pluginConfig[PCCBalance].args.resources: Invalid value"},
		{name: "PCC duplicate resource", plugin: "PCCBalance", obj: raw(`{"resources":["cpu","cpu"]}`), args: &PCCBalanceArgs{},
			wantErr: "pluginConfig[PCCBalance].args.resources[1]: Duplicate value"},
		{name: "PCC unknown field", plugin: "PCCBalance", obj: raw(`{"mod":"abs"}`), args: &PCCBalanceArgs{},
			wantErr: `pluginConfig[PCCBalance].args: `},
		{name: "hetero defaults", plugin: "HeteroPriority", args: &HeteroPriorityArgs{},
			want: &HeteroPriorityArgs{CardWeights: &CardWeights{1, 1, 1}, CPUPodScore: CPUPodScoreLeastRequested}},
		{name: "hetero negative weight", plugin: "HeteroPriority", obj: raw(`{"cardWeights":{"computeCapability":-1,"memoryBandwidth":1,"maxClock":1}}`), args: &HeteroPriorityArgs{},
			wantErr: "pluginConfig[HeteroPriority].args.cardWeights.computeCapability: Invalid value: -1"},
		{name: "hetero all zero", plugin: "HeteroPriority", obj: raw(`{"cardWeights":{"computeCapability":0,"memoryBandwidth":0,"maxClock":0}}`), args: &HeteroPriorityArgs{},
			want: &HeteroPriorityArgs{CardWeights: &CardWeights{}, CPUPodScore: CPUPodScoreLeastRequested}},
		{name: "hetero weight too large", plugin: "HeteroPriority", obj: raw(`{"cardWeights":{"computeCapability":101,"memoryBandwidth":0,"maxClock":0}}`), args: &HeteroPriorityArgs{},
			wantErr: "pluginConfig[HeteroPriority].args.cardWeights.computeCapability: Invalid value: 101"},
		{name: "hetero tier for the podKinds given", plugin: "HeteroPriority", obj: raw(`{"cpuPodScore":"Tier","podKinds":["CPU","WholeGPU"]}`), args: &HeteroPriorityArgs{},
			want: &HeteroPriorityArgs{CardWeights: &CardWeights{1, 1, 1}, CPUPodScore: CPUPodScoreTier, PodKinds: []PodKind{PodKindCPU, PodKindWholeGPU}}},
		{name: "hetero unknown CPU pod score", plugin: "HeteroPriority", obj: raw(`{"cpuPodScore":"Spread"}`), args: &HeteroPriorityArgs{},
			wantErr: `pluginConfig[HeteroPriority].args.cpuPodScore: Unsupported value: "Spread"`},
		{name: "unknown pod kind", plugin: "PCCBalance", obj: raw(`{"podKinds":["CPU","TPU"]}`), args: &PCCBalanceArgs{},
			wantErr: `pluginConfig[PCCBalance].args.podKinds[1]: Unsupported value: "TPU"`},
		{name: "unknown cpuPodsOnGPUNodes", plugin: "LoadAware", obj: raw(`{"cpuPodsOnGPUNodes":"Never"}`), args: &LoadAwareArgs{},
			wantErr: `pluginConfig[LoadAware].args.cpuPodsOnGPUNodes: Unsupported value: "Never"`},
		{name: "pod kind twice", plugin: "LoadAware", obj: raw(`{"podKinds":["CPU","CPU"]}`), args: &LoadAwareArgs{},
			wantErr: `pluginConfig[LoadAware].args.podKinds[1]: Duplicate value: "CPU"`},
		{name: "GPUFit has no arguments", plugin: "GPUFit", args: &GPUFitArgs{}, want: &GPUFitArgs{}},
		{name: "GPUFit's moved argument names its new home", plugin: "GPUFit", obj: raw(`{"useFeatureDiscoveryLabels":false}`), args: &GPUFitArgs{},
			wantErr: "pluginConfig[GPUFit].args.useFeatureDiscoveryLabels: Invalid value: false: moved to the shared configuration (gpus.useFeatureDiscoveryLabels"},
		{name: "Coscheduling defaults", plugin: "Coscheduling", args: &CoschedulingArgs{},
			want: &CoschedulingArgs{PermitWaitingTimeSeconds: ptr.To[int64](60)}},
		{name: "Coscheduling timeout", plugin: "Coscheduling", obj: raw(`{"permitWaitingTimeSeconds":5}`), args: &CoschedulingArgs{},
			want: &CoschedulingArgs{PermitWaitingTimeSeconds: ptr.To[int64](5)}},
		{name: "Coscheduling's moved arguments, each named", plugin: "Coscheduling", obj: raw(`{"backoffSeconds":10,"backfill":false}`), args: &CoschedulingArgs{},
			wantErr: "[pluginConfig[Coscheduling].args.backfill: Invalid value: false: moved to the shared configuration (jobQueue.backfill, kind SharedConfiguration): one value serves every profile, pluginConfig[Coscheduling].args.backoffSeconds: Invalid value: 10: moved to the shared configuration (jobQueue.backoffSeconds"},
		{name: "Coscheduling zero timeout", plugin: "Coscheduling", obj: raw(`{"permitWaitingTimeSeconds":0}`), args: &CoschedulingArgs{},
			wantErr: "pluginConfig[Coscheduling].args.permitWaitingTimeSeconds: Invalid value: 0"},
		{name: "Coscheduling timeout too long", plugin: "Coscheduling", obj: raw(`{"permitWaitingTimeSeconds":3601}`), args: &CoschedulingArgs{},
			wantErr: "pluginConfig[Coscheduling].args.permitWaitingTimeSeconds: Invalid value: 3601"},
		{name: "LoadAware defaults", plugin: "LoadAware", args: &LoadAwareArgs{},
			want: &LoadAwareArgs{Weights: &LoadWeights{1, 1, 1, 1}, MetricsTTLSeconds: ptr.To[int64](60), Thresholds: &LoadThresholds{}, CPUPodsOnGPUNodes: CPUPodsOnGPUNodesAlways}},
		{name: "LoadAware thresholds", plugin: "LoadAware", obj: raw(`{"thresholds":{"cpu":90},"metricsTTLSeconds":30}`), args: &LoadAwareArgs{},
			want: &LoadAwareArgs{Weights: &LoadWeights{1, 1, 1, 1}, MetricsTTLSeconds: ptr.To[int64](30), Thresholds: &LoadThresholds{CPU: 90}, CPUPodsOnGPUNodes: CPUPodsOnGPUNodesAlways}},
		{name: "LoadAware all weights zero", plugin: "LoadAware", obj: raw(`{"weights":{"cpu":0,"memory":0,"network":0,"disk":0}}`), args: &LoadAwareArgs{},
			wantErr: "pluginConfig[LoadAware].args.weights: Invalid value"},
		{name: "LoadAware threshold over 100", plugin: "LoadAware", obj: raw(`{"thresholds":{"disk":101}}`), args: &LoadAwareArgs{},
			wantErr: "pluginConfig[LoadAware].args.thresholds.disk: Invalid value: 101"},
		{name: "LoadAware zero TTL", plugin: "LoadAware", obj: raw(`{"metricsTTLSeconds":0}`), args: &LoadAwareArgs{},
			wantErr: "pluginConfig[LoadAware].args.metricsTTLSeconds: Invalid value: 0"},
		{name: "LoadAware misspelt field", plugin: "LoadAware", obj: raw(`{"weight":{"cpu":1}}`), args: &LoadAwareArgs{},
			wantErr: `pluginConfig[LoadAware].args: `},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Decode(tc.plugin, tc.obj, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Decode error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tc.args); diff != "" {
				t.Errorf("args (-want,+got):\n%s", diff)
			}
		})
	}
}
