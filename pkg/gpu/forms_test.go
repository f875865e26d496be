package gpu

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// readForm runs one form's translator on a pod of the given annotations
// and limits ("name=quantity"), and returns the fields of the canonical
// request it filled, by name.
func readForm(annotations map[string]string, limits []string, form func(a map[string]string, requests corev1.ResourceList, c *canonical)) map[string][]reading {
	pod := limitsPod(annotations, limits...)
	var c canonical
	form(pod.Annotations, resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), &c)
	got := map[string][]reading{}
	for name, f := range map[string]*readings{
		"gpusAgain": &c.gpusAgain, "milli": &c.milli, "gpuMem": &c.gpuMem, "gpuMemPercent": &c.gpuMemPercent,
		"shareCards": &c.shareCards, "memory": &c.memory, "cores": &c.cores,
		"models": &c.models, "excludeModels": &c.excludeModels, "uuids": &c.uuids, "excludeUUIDs": &c.excludeUUIDs,
	} {
		if f.n > 0 {
			got[name] = f.all()
		}
	}
	if c.gpus != (reading{}) {
		got["gpus"] = []reading{c.gpus}
	}
	if c.refused != (reading{}) {
		got["refused"] = []reading{c.refused}
	}
	if c.shareInResources {
		got["shareInResources"] = nil
	}
	return got
}

type formCase struct {
	name        string
	annotations map[string]string
	limits      []string
	want        map[string][]reading
}

func runForm(t *testing.T, form func(map[string]string, corev1.ResourceList, *canonical), tests []formCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := readForm(tc.annotations, tc.limits, form)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(reading{})); diff != "" {
				t.Errorf("canonical fields (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestOfAisched(t *testing.T) {
	runForm(t, ofAisched, []formCase{
		{name: "CPU pod", want: map[string][]reading{"gpus": {{key: "nvidia.com/gpu"}}}},
		{name: "whole cards", limits: []string{"nvidia.com/gpu=2"}, want: map[string][]reading{"gpus": {{key: "nvidia.com/gpu", n: 2}}}},
		{name: "too many cards", limits: []string{"nvidia.com/gpu=65"},
			want: map[string][]reading{"gpus": {{key: "nvidia.com/gpu", raw: "65", n: 65, bad: "at most 64 cards per pod"}}}},
		{name: "share of two cards",
			annotations: map[string]string{MilliAnnotation: "300", GPUMemAnnotation: "4000", CardsAnnotation: "2"},
			want: map[string][]reading{"gpus": {{key: "nvidia.com/gpu"}},
				"milli":      {{key: MilliAnnotation, raw: "300", n: 300}},
				"gpuMem":     {{key: GPUMemAnnotation, raw: "4000", n: 4000}},
				"shareCards": {{key: CardsAnnotation, raw: "2", n: 2}}}},
		// 1000 thousandths reads; the parser refuses it as a whole card.
		{name: "share of a whole card", annotations: map[string]string{MilliAnnotation: "1000"},
			want: map[string][]reading{"gpus": {{key: "nvidia.com/gpu"}}, "milli": {{key: MilliAnnotation, raw: "1000", n: 1000}}}},
		{name: "share not a number", annotations: map[string]string{MilliAnnotation: "0.5"},
			want: map[string][]reading{"gpus": {{key: "nvidia.com/gpu"}}, "milli": {{key: MilliAnnotation, raw: "0.5", bad: "want thousandths of one card, 1 to 999"}}}},
		// 32Gi is 32768 MiB; 40001Ki is 39.06 MiB, rounded up to 40.
		{name: "per-card constraints", limits: []string{"nvidia.com/gpu=1"},
			annotations: map[string]string{MemoryAnnotation: "32Gi", CoresAnnotation: " 5000 ", ModelsAnnotation: "A100"},
			want: map[string][]reading{"gpus": {{key: "nvidia.com/gpu", n: 1}},
				"memory": {{key: MemoryAnnotation, raw: "32Gi", n: 32768}},
				"cores":  {{key: CoresAnnotation, raw: " 5000 ", n: 5000}},
				"models": {{key: ModelsAnnotation, raw: "A100"}}}},
		{name: "memory rounded up to MiB", limits: []string{"nvidia.com/gpu=1"}, annotations: map[string]string{MemoryAnnotation: "40001Ki"},
			want: map[string][]reading{"gpus": {{key: "nvidia.com/gpu", n: 1}}, "memory": {{key: MemoryAnnotation, raw: "40001Ki", n: 40}}}},
		{name: "memory beyond a card", limits: []string{"nvidia.com/gpu=1"}, annotations: map[string]string{MemoryAnnotation: "1e100"},
			want: map[string][]reading{"gpus": {{key: "nvidia.com/gpu", n: 1}}, "memory": {{key: MemoryAnnotation, raw: "1e100", bad: "more than 1Ti per card"}}}},
		{name: "peers' keys are not aisched's", annotations: map[string]string{HAMiGPUCoresAnnotation: "30", KAIFractionAnnotation: "0.5"},
			want: map[string][]reading{"gpus": {{key: "nvidia.com/gpu"}}}},
	})
}

func TestOfOKS(t *testing.T) {
	form := func(a map[string]string, _ corev1.ResourceList, c *canonical) { ofOKS(a, c) }
	runForm(t, form, []formCase{
		{name: "none", want: map[string][]reading{}},
		// 32000 MB = 32e9 bytes = 30517.6 MiB, rounded up to 30518.
		{name: "count, memory and cores",
			annotations: map[string]string{OKSCountAnnotation: "2", OKSMemoryAnnotation: "32000", OKSCoresAnnotation: "2000"},
			want: map[string][]reading{"gpusAgain": {{key: OKSCountAnnotation, raw: "2", n: 2}},
				"memory": {{key: OKSMemoryAnnotation, raw: "32000", n: 30518}},
				"cores":  {{key: OKSCoresAnnotation, raw: "2000", n: 2000}}}},
		{name: "count zero", annotations: map[string]string{OKSCountAnnotation: "0"},
			want: map[string][]reading{"gpusAgain": {{key: OKSCountAnnotation, raw: "0", bad: "want a whole number of cards, at least 1"}}}},
		{name: "memory with a unit", annotations: map[string]string{OKSMemoryAnnotation: "32GB"},
			want: map[string][]reading{"memory": {{key: OKSMemoryAnnotation, raw: "32GB", bad: "want a whole number of MB per card"}}}},
		// 1 TiB is 1,099,511 MB.
		{name: "memory beyond a card", annotations: map[string]string{OKSMemoryAnnotation: "1099512"},
			want: map[string][]reading{"memory": {{key: OKSMemoryAnnotation, raw: "1099512", bad: "more than 1 TiB per card"}}}},
	})
}
