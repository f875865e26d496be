package gpu

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestOfHAMi(t *testing.T) {
	runForm(t, ofHAMi, []formCase{
		{name: "none", limits: []string{"nvidia.com/gpu=1"}, want: map[string][]reading{}},
		// gpucores is percent of the card's cores: 30% is 300 thousandths.
		// A resource is quoted as the apiserver writes it: 3000 is "3k".
		{name: "resources", limits: []string{"nvidia.com/gpu=2", "nvidia.com/gpumem=3000", "nvidia.com/gpucores=30"},
			want: map[string][]reading{"shareInResources": nil,
				"milli":  {{key: "resources.limits[nvidia.com/gpucores]", raw: "30", n: 300}},
				"gpuMem": {{key: "resources.limits[nvidia.com/gpumem]", raw: "3k", n: 3000}}}},
		{name: "memory percentage resource", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem-percentage=50"},
			want: map[string][]reading{"shareInResources": nil,
				"gpuMemPercent": {{key: "resources.limits[nvidia.com/gpumem-percentage]", raw: "50", n: 50}}}},
		{name: "annotations", annotations: map[string]string{HAMiGPUMemAnnotation: "3000", HAMiGPUCoresAnnotation: "30", HAMiGPUMemPercentAnnotation: "25"},
			want: map[string][]reading{
				"milli":         {{key: HAMiGPUCoresAnnotation, raw: "30", n: 300}},
				"gpuMem":        {{key: HAMiGPUMemAnnotation, raw: "3000", n: 3000}},
				"gpuMemPercent": {{key: HAMiGPUMemPercentAnnotation, raw: "25", n: 25}}}},
		// The annotation before the resource, so that the resource is
		// named when they disagree.
		{name: "annotation and resource", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem=3000"}, annotations: map[string]string{HAMiGPUMemAnnotation: "2000"},
			want: map[string][]reading{"shareInResources": nil,
				"gpuMem": {{key: HAMiGPUMemAnnotation, raw: "2000", n: 2000}, {key: "resources.limits[nvidia.com/gpumem]", raw: "3k", n: 3000}}}},
		{name: "cores above 100", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpucores=130"},
			want: map[string][]reading{"shareInResources": nil,
				"milli": {{key: "resources.limits[nvidia.com/gpucores]", raw: "130", bad: "want a percent of one card's cores, 1 to 100"}}}},
		{name: "memory fractional", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem=1500m"},
			want: map[string][]reading{"shareInResources": nil,
				"gpuMem": {{key: "resources.limits[nvidia.com/gpumem]", raw: "1500m", bad: "want a whole number of MiB of each card's memory, 1 to 1048576"}}}},
		{name: "cores annotation zero", annotations: map[string]string{HAMiGPUCoresAnnotation: "0"},
			want: map[string][]reading{"milli": {{key: HAMiGPUCoresAnnotation, raw: "0", bad: "want a percent of one card's cores, 1 to 99"}}}},
		{name: "types and UUIDs", limits: []string{"nvidia.com/gpu=1"},
			annotations: map[string]string{HAMiUseTypeAnnotation: "V100", HAMiNoUseTypeAnnotation: "T4", HAMiUseUUIDAnnotation: "GPU-a", HAMiNoUseUUIDAnnotation: "GPU-b"},
			want: map[string][]reading{
				"models": {{key: HAMiUseTypeAnnotation, raw: "V100"}}, "excludeModels": {{key: HAMiNoUseTypeAnnotation, raw: "T4"}},
				"uuids": {{key: HAMiUseUUIDAnnotation, raw: "GPU-a"}}, "excludeUUIDs": {{key: HAMiNoUseUUIDAnnotation, raw: "GPU-b"}}}},
		// Refused in name order: the policy before the device mode.
		{name: "policy refused", annotations: map[string]string{"nvidia.com/vgpu-mode": "mig", "hami.io/gpu-scheduler-policy": "binpack"},
			want: map[string][]reading{"refused": {{key: "hami.io/gpu-scheduler-policy", raw: "binpack",
				bad: "not supported: aisched places shares with its profile (FGD, BestFit); remove the annotation"}}}},
		{name: "device mode refused", annotations: map[string]string{"nvidia.com/vgpu-mode": "mig"},
			want: map[string][]reading{"refused": {{key: "nvidia.com/vgpu-mode", raw: "mig",
				bad: "not supported: aisched does not switch the device mode; remove the annotation"}}}},
	})
}

func TestOfKAI(t *testing.T) {
	form := func(a map[string]string, _ corev1.ResourceList, c *canonical) { ofKAI(a, c) }
	runForm(t, form, []formCase{
		{name: "none", want: map[string][]reading{}},
		{name: "fraction on two cards", annotations: map[string]string{KAIFractionAnnotation: "0.5", KAINumDevicesAnnotation: "2"},
			want: map[string][]reading{"milli": {{key: KAIFractionAnnotation, raw: "0.5", n: 500}}, "shareCards": {{key: KAINumDevicesAnnotation, raw: "2", n: 2}}}},
		// 0.3333 of a card is 333.3 thousandths, rounded to 333.
		{name: "fraction rounded", annotations: map[string]string{KAIFractionAnnotation: "0.3333"},
			want: map[string][]reading{"milli": {{key: KAIFractionAnnotation, raw: "0.3333", n: 333}}}},
		{name: "memory", annotations: map[string]string{KAIMemoryAnnotation: "2000"},
			want: map[string][]reading{"gpuMem": {{key: KAIMemoryAnnotation, raw: "2000", n: 2000}}}},
		{name: "fraction of 1", annotations: map[string]string{KAIFractionAnnotation: "1"},
			want: map[string][]reading{"milli": {{key: KAIFractionAnnotation, raw: "1", bad: "a fraction of 1 is a whole card: request nvidia.com/gpu: 1 instead"}}}},
		// 0.9996 rounds to 1000 thousandths: a whole card.
		{name: "fraction that rounds to 1", annotations: map[string]string{KAIFractionAnnotation: "0.9996"},
			want: map[string][]reading{"milli": {{key: KAIFractionAnnotation, raw: "0.9996", bad: "a fraction of 1 is a whole card: request nvidia.com/gpu: 1 instead"}}}},
		{name: "fraction too small", annotations: map[string]string{KAIFractionAnnotation: "0.0001"},
			want: map[string][]reading{"milli": {{key: KAIFractionAnnotation, raw: "0.0001", bad: "below a thousandth of a card, the smallest share aisched accounts"}}}},
		{name: "fraction NaN", annotations: map[string]string{KAIFractionAnnotation: "NaN"},
			want: map[string][]reading{"milli": {{key: KAIFractionAnnotation, raw: "NaN", bad: "want a fraction of one card above 0 and below 1, such as 0.5"}}}},
		{name: "devices zero", annotations: map[string]string{KAINumDevicesAnnotation: "0"},
			want: map[string][]reading{"shareCards": {{key: KAINumDevicesAnnotation, raw: "0", bad: "want a whole number of cards, 1 to 64"}}}},
	})
}

func TestOfVolcano(t *testing.T) {
	form := func(_ map[string]string, requests corev1.ResourceList, c *canonical) { ofVolcano(requests, c) }
	runForm(t, form, []formCase{
		{name: "none", limits: []string{"nvidia.com/gpu=1"}, want: map[string][]reading{}},
		// The first in name order: vgpu-memory before vgpu-number.
		{name: "vGPU", limits: []string{"volcano.sh/vgpu-number=1", "volcano.sh/vgpu-memory=3000"},
			want: map[string][]reading{"refused": {{key: "resources.limits[volcano.sh/vgpu-memory]", raw: "3k",
				bad: "not supported: Volcano's vGPU: write nvidia.com/gpu: 1 with nvidia.com/gpumem (MiB), or gpu.aisched.io/gpumem"}}}},
		{name: "zero is no request", limits: []string{"volcano.sh/vgpu-cores=0"}, want: map[string][]reading{}},
	})
}

func TestOfCGPU(t *testing.T) {
	form := func(_ map[string]string, requests corev1.ResourceList, c *canonical) { ofCGPU(requests, c) }
	runForm(t, form, []formCase{
		{name: "none", want: map[string][]reading{}},
		{name: "memory", limits: []string{"aliyun.com/gpu-mem=4"},
			want: map[string][]reading{"refused": {{key: "resources.limits[aliyun.com/gpu-mem]", raw: "4",
				bad: "not supported: Alibaba cGPU: write the share of one card's memory in MiB in gpu.aisched.io/gpumem"}}}},
		{name: "count before memory", limits: []string{"aliyun.com/gpu-mem=4", "aliyun.com/gpu-count=1"},
			want: map[string][]reading{"refused": {{key: "resources.limits[aliyun.com/gpu-count]", raw: "1",
				bad: "not supported: Alibaba cGPU: write nvidia.com/gpu for whole cards, or gpu.aisched.io/milli for a share"}}}},
	})
}
