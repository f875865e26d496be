package gpu

import "testing"

// BenchmarkParseRequest reads the GPU request of pods in each form, as the
// scheduler does once per pod and cycle (GPUFit's PreFilter) and the
// ledger once per pod event:
//
//	go test -run '^$' -bench ParseRequest -benchmem ./pkg/gpu/
func BenchmarkParseRequest(b *testing.B) {
	for _, bc := range []struct {
		name        string
		limits      []string
		annotations map[string]string
	}{
		{name: "CPU pod"},
		{name: "whole cards", limits: []string{"nvidia.com/gpu=2"}},
		{name: "whole cards with constraints", limits: []string{"nvidia.com/gpu=2"},
			annotations: map[string]string{MemoryAnnotation: "40Gi", ModelsAnnotation: "A100"}},
		{name: "aisched share", annotations: map[string]string{MilliAnnotation: "300", GPUMemAnnotation: "3000", CardsAnnotation: "2"}},
		{name: "HAMi resources", limits: []string{"nvidia.com/gpu=2", "nvidia.com/gpumem=3000", "nvidia.com/gpucores=30"}},
		{name: "KAI fraction", annotations: map[string]string{KAIFractionAnnotation: "0.5", KAINumDevicesAnnotation: "2"}},
	} {
		pod := limitsPod(bc.annotations, bc.limits...)
		if _, err := ParseRequest(pod); err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseRequest(pod); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
