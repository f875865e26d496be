package gpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func gpuPod(count int64, annotations map[string]string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}
	if count > 0 {
		q := *resource.NewQuantity(count, resource.DecimalSI)
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{ResourceName: q},
			Requests: corev1.ResourceList{ResourceName: q},
		}
	}
	return pod
}

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name        string
		count       int64
		annotations map[string]string
		want        Request
		wantKey     string // the key a *RequestError must name; "" = no error
	}{
		{name: "CPU pod", want: Request{}},
		{name: "count only", count: 2, want: Request{Count: 2}},
		{name: "aisched keys", count: 1,
			annotations: map[string]string{MemoryAnnotation: "32Gi", CoresAnnotation: "5000", ModelsAnnotation: "NVIDIA A100, Tesla-V100"},
			want:        Request{Count: 1, MemoryMiB: 32768, Cores: 5000, Models: []string{"nvidia-a100", "tesla-v100"}}},
		// 32000 MB = 32e9 bytes = 30517.6 MiB, rounded up to 30518.
		{name: "oks keys", count: 2,
			annotations: map[string]string{OKSCountAnnotation: "2", OKSMemoryAnnotation: "32000", OKSCoresAnnotation: "2000"},
			want:        Request{Count: 2, MemoryMiB: 30518, Cores: 2000}},
		{name: "both memory keys agree", count: 1,
			annotations: map[string]string{MemoryAnnotation: "30518Mi", OKSMemoryAnnotation: "32000"},
			want:        Request{Count: 1, MemoryMiB: 30518}},
		{name: "zero memory accepts any card", count: 1, annotations: map[string]string{MemoryAnnotation: "0"}, want: Request{Count: 1}},
		{name: "oks count disagrees", count: 1, annotations: map[string]string{OKSCountAnnotation: "2"}, wantKey: OKSCountAnnotation},
		{name: "oks count without resource", annotations: map[string]string{OKSCountAnnotation: "2"}, wantKey: OKSCountAnnotation},
		{name: "oks count not a number", count: 1, annotations: map[string]string{OKSCountAnnotation: "two"}, wantKey: OKSCountAnnotation},
		{name: "oks count zero", count: 1, annotations: map[string]string{OKSCountAnnotation: "0"}, wantKey: OKSCountAnnotation},
		{name: "memory malformed", count: 1, annotations: map[string]string{MemoryAnnotation: "lots"}, wantKey: MemoryAnnotation},
		{name: "memory negative", count: 1, annotations: map[string]string{MemoryAnnotation: "-1Gi"}, wantKey: MemoryAnnotation},
		{name: "memory too large", count: 1, annotations: map[string]string{MemoryAnnotation: "2Ti"}, wantKey: MemoryAnnotation},
		{name: "memory beyond int64", count: 1, annotations: map[string]string{MemoryAnnotation: "1e100"}, wantKey: MemoryAnnotation},
		{name: "oks memory too large", count: 1, annotations: map[string]string{OKSMemoryAnnotation: "1100000"}, wantKey: OKSMemoryAnnotation},
		{name: "oks memory with unit", count: 1, annotations: map[string]string{OKSMemoryAnnotation: "32GB"}, wantKey: OKSMemoryAnnotation},
		{name: "memory keys disagree", count: 1, annotations: map[string]string{MemoryAnnotation: "16Gi", OKSMemoryAnnotation: "32000"}, wantKey: OKSMemoryAnnotation},
		{name: "cores negative", count: 1, annotations: map[string]string{CoresAnnotation: "-5"}, wantKey: CoresAnnotation},
		{name: "cores keys disagree", count: 1, annotations: map[string]string{CoresAnnotation: "100", OKSCoresAnnotation: "200"}, wantKey: OKSCoresAnnotation},
		{name: "empty model", count: 1, annotations: map[string]string{ModelsAnnotation: "A100,,T4"}, wantKey: ModelsAnnotation},
		{name: "constraint without count", annotations: map[string]string{MemoryAnnotation: "16Gi"}, wantKey: MemoryAnnotation},
		{name: "too many cards", count: 65, wantKey: string(ResourceName)},
		{name: "share of a card", annotations: map[string]string{MilliAnnotation: "470"}, want: Request{Count: 1, Milli: 470}},
		{name: "share with per-card constraints", annotations: map[string]string{MilliAnnotation: "1", ModelsAnnotation: "Tesla-T4"},
			want: Request{Count: 1, Milli: 1, Models: []string{"tesla-t4"}}},
		{name: "share with whole cards", count: 1, annotations: map[string]string{MilliAnnotation: "500"}, wantKey: MilliAnnotation},
		{name: "share of a whole card", annotations: map[string]string{MilliAnnotation: "1000"}, wantKey: MilliAnnotation},
		{name: "share zero", annotations: map[string]string{MilliAnnotation: "0"}, wantKey: MilliAnnotation},
		{name: "share above a card", annotations: map[string]string{MilliAnnotation: "1500"}, wantKey: MilliAnnotation},
		{name: "share not whole", annotations: map[string]string{MilliAnnotation: "0.5"}, wantKey: MilliAnnotation},
		{name: "share of memory", annotations: map[string]string{GPUMemAnnotation: "3000"}, want: Request{Count: 1, GPUMemMiB: 3000}},
		{name: "share of compute and memory", annotations: map[string]string{MilliAnnotation: "250", GPUMemAnnotation: "4096", MemoryAnnotation: "16Gi"},
			want: Request{Count: 1, Milli: 250, GPUMemMiB: 4096, MemoryMiB: 16384}},
		{name: "HAMi names", annotations: map[string]string{HAMiGPUMemAnnotation: "3000", HAMiGPUCoresAnnotation: "30"},
			want: Request{Count: 1, Milli: 300, GPUMemMiB: 3000}},
		{name: "HAMi names agree with ours", annotations: map[string]string{HAMiGPUMemAnnotation: "3000", GPUMemAnnotation: "3000", HAMiGPUCoresAnnotation: "30", MilliAnnotation: "300"},
			want: Request{Count: 1, Milli: 300, GPUMemMiB: 3000}},
		{name: "HAMi cores disagree", annotations: map[string]string{HAMiGPUCoresAnnotation: "30", MilliAnnotation: "250"}, wantKey: HAMiGPUCoresAnnotation},
		{name: "HAMi memory disagrees", annotations: map[string]string{HAMiGPUMemAnnotation: "3000", GPUMemAnnotation: "2000"}, wantKey: HAMiGPUMemAnnotation},
		{name: "HAMi cores of a whole card", annotations: map[string]string{HAMiGPUCoresAnnotation: "100"}, wantKey: HAMiGPUCoresAnnotation},
		{name: "HAMi cores zero", annotations: map[string]string{HAMiGPUCoresAnnotation: "0"}, wantKey: HAMiGPUCoresAnnotation},
		{name: "share of memory with whole cards", count: 1, annotations: map[string]string{GPUMemAnnotation: "3000"}, wantKey: GPUMemAnnotation},
		{name: "share of memory zero", annotations: map[string]string{GPUMemAnnotation: "0"}, wantKey: GPUMemAnnotation},
		{name: "share of memory as a quantity", annotations: map[string]string{GPUMemAnnotation: "3Gi"}, wantKey: GPUMemAnnotation},
		{name: "share of memory above 1 TiB", annotations: map[string]string{HAMiGPUMemAnnotation: "2000000"}, wantKey: HAMiGPUMemAnnotation},
		{name: "share of each of two cards", annotations: map[string]string{MilliAnnotation: "300", GPUMemAnnotation: "4000", CardsAnnotation: "2"},
			want: Request{Count: 2, Milli: 300, GPUMemMiB: 4000}},
		{name: "share on one card, said", annotations: map[string]string{MilliAnnotation: "300", CardsAnnotation: "1"}, want: Request{Count: 1, Milli: 300}},
		{name: "cards without a share", annotations: map[string]string{CardsAnnotation: "2"}, wantKey: CardsAnnotation},
		{name: "cards with whole cards", count: 2, annotations: map[string]string{CardsAnnotation: "2"}, wantKey: CardsAnnotation},
		{name: "shares of too many cards", annotations: map[string]string{MilliAnnotation: "300", CardsAnnotation: "65"}, wantKey: CardsAnnotation},
		{name: "cards not a number", annotations: map[string]string{MilliAnnotation: "300", CardsAnnotation: "two"}, wantKey: CardsAnnotation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkParse(t, gpuPod(tc.count, tc.annotations), tc.want, tc.wantKey)
		})
	}
}

// checkParse checks that ParseRequest reads pod as want, or, when wantKey
// is set, fails with a *RequestError naming it.
func checkParse(t *testing.T, pod *corev1.Pod, want Request, wantKey string) {
	t.Helper()
	got, err := ParseRequest(pod)
	if wantKey == "" {
		if err != nil {
			t.Fatalf("ParseRequest: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("request (-want,+got):\n%s", diff)
		}
		return
	}
	var re *RequestError
	if !errors.As(err, &re) {
		t.Fatalf("ParseRequest = %+v, %v; want a *RequestError naming %s", got, err, wantKey)
	}
	if re.Key != wantKey || !strings.Contains(err.Error(), wantKey) {
		t.Errorf("error %q names %s, want %s", err, re.Key, wantKey)
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add(int64(1), "32Gi", "32000", "2000", "A100", "1")
	f.Add(int64(0), "", "", "", "", "")
	f.Add(int64(3), "1e3", "-1", "x", ",", "3")
	f.Fuzz(func(t *testing.T, count int64, mem, oksMem, cores, models, oksCount string) {
		if count < 0 || count > 1000 {
			return
		}
		annotations := map[string]string{}
		for k, v := range map[string]string{MemoryAnnotation: mem, OKSMemoryAnnotation: oksMem, CoresAnnotation: cores, ModelsAnnotation: models, OKSCountAnnotation: oksCount} {
			if v != "" {
				annotations[k] = v
			}
		}
		r, err := ParseRequest(gpuPod(count, annotations))
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) || re.Key == "" {
				t.Fatalf("error %v is not a *RequestError naming a key", err)
			}
			return
		}
		if r.Count != count || r.MemoryMiB < 0 || r.Cores < 0 || r.MemoryMiB > maxMemoryMiB {
			t.Fatalf("accepted request %+v for count %d", r, count)
		}
		// A positive memory request is never dropped silently.
		if q, err := resource.ParseQuantity(strings.TrimSpace(mem)); err == nil && q.Sign() > 0 && count > 0 && r.MemoryMiB == 0 {
			t.Fatalf("memory %q accepted as no constraint", mem)
		}
		if r.Count == 0 && (r.MemoryMiB > 0 || r.Cores > 0 || len(r.Models) > 0) {
			t.Fatalf("per-card constraints %+v accepted without cards", r)
		}
	})
}

func TestNormalizeModel(t *testing.T) {
	for in, want := range map[string]string{
		"NVIDIA A100-SXM4-40GB": "nvidia-a100-sxm4-40gb",
		"  Tesla_T4 ":           "tesla-t4",
		"--":                    "",
	} {
		if got := NormalizeModel(in); got != want {
			t.Errorf("NormalizeModel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRequestShares(t *testing.T) {
	for _, tc := range []struct {
		r                 Request
		shared            bool
		whole, totalMilli int64
	}{
		{Request{}, false, 0, 0},
		{Request{Count: 3}, false, 3, 3000},
		{Request{Count: 1, Milli: 999}, true, 0, 999},
		// A share of memory alone reserves no compute.
		{Request{Count: 1, GPUMemMiB: 3000}, true, 0, 0},
		// 300 thousandths of each of two cards.
		{Request{Count: 2, Milli: 300, GPUMemMiB: 3000}, true, 0, 600},
		{Request{Count: 1, GPUMemPercent: 50}, true, 0, 0},
	} {
		if got := tc.r.Shared(); got != tc.shared {
			t.Errorf("%+v: Shared() = %t, want %t", tc.r, got, tc.shared)
		}
		if got := tc.r.WholeCards(); got != tc.whole {
			t.Errorf("%+v: WholeCards() = %d, want %d", tc.r, got, tc.whole)
		}
		if got := tc.r.TotalMilli(); got != tc.totalMilli {
			t.Errorf("%+v: TotalMilli() = %d, want %d", tc.r, got, tc.totalMilli)
		}
	}
}

func TestDescribe(t *testing.T) {
	for r, want := range map[*Request]string{
		{}:                                      "",
		{Count: 1}:                              "1 GPU",
		{Count: 4}:                              "4 GPUs",
		{Count: 1, Milli: 500}:                  "500/1000 of a GPU",
		{Count: 2, Milli: 300, GPUMemMiB: 3000}: "300/1000 and 3000 MiB of each of 2 GPUs",
		{Count: 1, GPUMemPercent: 50}:           "50% of the memory of a GPU",
	} {
		if got := r.Describe(); got != want {
			t.Errorf("%+v: Describe() = %q, want %q", *r, got, want)
		}
	}
}

func TestShareMemory(t *testing.T) {
	card := &Card{MemoryMiB: 16384}
	for _, tc := range []struct {
		name        string
		r           Request
		annotations map[string]string
		wantOn      int64
		wantBound   int64
		wantBoundOK bool
	}{
		{name: "MiB", r: Request{Count: 1, GPUMemMiB: 3000}, wantOn: 3000, wantBound: 3000, wantBoundOK: true},
		{name: "compute alone", r: Request{Count: 1, Milli: 300}, wantOn: 0, wantBound: 0, wantBoundOK: true},
		// 50% of 16384 MiB; 33% is 5406.72, rounded down.
		{name: "percent", r: Request{Count: 1, GPUMemPercent: 50}, annotations: map[string]string{AssignedGPUMemAnnotation: "8192"}, wantOn: 8192, wantBound: 8192, wantBoundOK: true},
		{name: "percent rounded down", r: Request{Count: 1, GPUMemPercent: 33}, annotations: map[string]string{AssignedGPUMemAnnotation: "5406"}, wantOn: 5406, wantBound: 5406, wantBoundOK: true},
		{name: "percent, not recorded", r: Request{Count: 1, GPUMemPercent: 50}, wantOn: 8192},
		{name: "percent, record malformed", r: Request{Count: 1, GPUMemPercent: 50}, annotations: map[string]string{AssignedGPUMemAnnotation: "8Gi"}, wantOn: 8192},
		{name: "percent, record zero", r: Request{Count: 1, GPUMemPercent: 50}, annotations: map[string]string{AssignedGPUMemAnnotation: "0"}, wantOn: 8192},
		{name: "percent, record beyond a card", r: Request{Count: 1, GPUMemPercent: 50}, annotations: map[string]string{AssignedGPUMemAnnotation: "99999999"}, wantOn: 8192},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.MemMiBOn(card); got != tc.wantOn {
				t.Errorf("MemMiBOn(16384 MiB) = %d, want %d", got, tc.wantOn)
			}
			got, ok := tc.r.BoundMemMiB(tc.annotations)
			if got != tc.wantBound || ok != tc.wantBoundOK {
				t.Errorf("BoundMemMiB = %d, %t, want %d, %t", got, ok, tc.wantBound, tc.wantBoundOK)
			}
		})
	}
}

// limitsPod is a pod of one container with the limits given as
// "name=quantity" pairs; extended resources' requests default to them.
func limitsPod(annotations map[string]string, limits ...string) *corev1.Pod {
	pod := gpuPod(0, annotations)
	l := corev1.ResourceList{}
	for _, kv := range limits {
		name, q, _ := strings.Cut(kv, "=")
		l[corev1.ResourceName(name)] = resource.MustParse(q)
	}
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: l, Requests: l}
	return pod
}

// The peers' forms, as their documentation writes them: HAMi
// (project-hami.io, "Allocate device memory/core", "Assign to certain
// device type/UUID"), KAI ("GPU Sharing": gpu-fraction, gpu-memory).
func TestParsePeerForms(t *testing.T) {
	tests := []struct {
		name        string
		limits      []string
		annotations map[string]string
		want        Request
		wantKey     string
	}{
		{name: "HAMi one card with memory and cores", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem=3000", "nvidia.com/gpucores=30"},
			want: Request{Count: 1, Milli: 300, GPUMemMiB: 3000}},
		{name: "HAMi memory alone", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem=3000"},
			want: Request{Count: 1, GPUMemMiB: 3000}},
		{name: "HAMi all of the cores is a whole card", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpucores=100", "nvidia.com/gpumem=3000"},
			want: Request{Count: 1}},
		// examples/nvidia/default_use.yaml: two cards, 3000 MiB and 30% of each.
		{name: "HAMi two cards with a share of each", limits: []string{"nvidia.com/gpu=2", "nvidia.com/gpumem=3000", "nvidia.com/gpucores=30"},
			want: Request{Count: 2, Milli: 300, GPUMemMiB: 3000}},
		{name: "HAMi two cards whole by their cores", limits: []string{"nvidia.com/gpu=2", "nvidia.com/gpucores=100"}, want: Request{Count: 2}},
		{name: "HAMi cards counted twice", limits: []string{"nvidia.com/gpu=2", "nvidia.com/gpumem=3000"},
			annotations: map[string]string{CardsAnnotation: "2"}, wantKey: CardsAnnotation},
		{name: "HAMi share without its card", limits: []string{"nvidia.com/gpumem=3000"}, wantKey: "resources.limits[nvidia.com/gpumem]"},
		{name: "HAMi cores above 100", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpucores=130"}, wantKey: "resources.limits[nvidia.com/gpucores]"},
		{name: "HAMi memory beyond int64", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem=1e100"}, wantKey: "resources.limits[nvidia.com/gpumem]"},
		{name: "HAMi memory fractional", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem=1500m"}, wantKey: "resources.limits[nvidia.com/gpumem]"},
		// examples/nvidia/use_memory_fraction.yaml: half of each of two
		// cards' memory, 30% of their cores.
		{name: "HAMi memory percentage", limits: []string{"nvidia.com/gpu=2", "nvidia.com/gpumem-percentage=50", "nvidia.com/gpucores=30"},
			want: Request{Count: 2, Milli: 300, GPUMemPercent: 50}},
		{name: "HAMi memory percentage as an annotation", annotations: map[string]string{HAMiGPUMemPercentAnnotation: "25"}, want: Request{Count: 1, GPUMemPercent: 25}},
		{name: "HAMi memory percentage all of it", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem-percentage=100"}, want: Request{Count: 1, GPUMemPercent: 100}},
		{name: "HAMi memory percentage above 100", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem-percentage=150"}, wantKey: "resources.limits[nvidia.com/gpumem-percentage]"},
		{name: "HAMi memory percentage zero", annotations: map[string]string{HAMiGPUMemPercentAnnotation: "0"}, wantKey: HAMiGPUMemPercentAnnotation},
		{name: "HAMi memory in MiB and in percent", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem=3000", "nvidia.com/gpumem-percentage=50"},
			wantKey: "resources.limits[nvidia.com/gpumem-percentage]"},
		{name: "HAMi memory percentage resource and annotation disagree", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem-percentage=50"},
			annotations: map[string]string{HAMiGPUMemPercentAnnotation: "40"}, wantKey: "resources.limits[nvidia.com/gpumem-percentage]"},
		{name: "HAMi resource and annotation disagree", limits: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem=3000"},
			annotations: map[string]string{GPUMemAnnotation: "2000"}, wantKey: "resources.limits[nvidia.com/gpumem]"},
		{name: "HAMi card type", limits: []string{"nvidia.com/gpu=1"}, annotations: map[string]string{HAMiUseTypeAnnotation: "V100,A10"},
			want: Request{Count: 1, Models: []string{"v100", "a10"}}},
		{name: "HAMi card type refused", limits: []string{"nvidia.com/gpu=1"}, annotations: map[string]string{HAMiNoUseTypeAnnotation: "T4"},
			want: Request{Count: 1, ExcludeModels: []string{"t4"}}},
		{name: "HAMi card UUIDs", limits: []string{"nvidia.com/gpu=2"},
			annotations: map[string]string{HAMiUseUUIDAnnotation: "GPU-a, GPU-b", HAMiNoUseUUIDAnnotation: "GPU-c"},
			want:        Request{Count: 2, UUIDs: []string{"GPU-a", "GPU-b"}, ExcludeUUIDs: []string{"GPU-c"}}},
		{name: "HAMi card type and ours", limits: []string{"nvidia.com/gpu=1"},
			annotations: map[string]string{HAMiUseTypeAnnotation: "V100", ModelsAnnotation: "A100"}, wantKey: HAMiUseTypeAnnotation},
		{name: "HAMi card UUIDs without cards", annotations: map[string]string{HAMiUseUUIDAnnotation: "GPU-a"}, wantKey: HAMiUseUUIDAnnotation},
		{name: "HAMi empty UUID", limits: []string{"nvidia.com/gpu=1"}, annotations: map[string]string{HAMiNoUseUUIDAnnotation: "GPU-a,,"}, wantKey: HAMiNoUseUUIDAnnotation},
		{name: "KAI fraction", annotations: map[string]string{KAIFractionAnnotation: "0.5"}, want: Request{Count: 1, Milli: 500}},
		{name: "KAI memory", annotations: map[string]string{KAIMemoryAnnotation: "2000"}, want: Request{Count: 1, GPUMemMiB: 2000}},
		{name: "KAI fraction of 1", annotations: map[string]string{KAIFractionAnnotation: "1"}, wantKey: KAIFractionAnnotation},
		{name: "KAI fraction too small", annotations: map[string]string{KAIFractionAnnotation: "0.0001"}, wantKey: KAIFractionAnnotation},
		{name: "KAI fraction not a number", annotations: map[string]string{KAIFractionAnnotation: "half"}, wantKey: KAIFractionAnnotation},
		{name: "KAI fraction NaN", annotations: map[string]string{KAIFractionAnnotation: "NaN"}, wantKey: KAIFractionAnnotation},
		{name: "KAI fraction with whole cards", limits: []string{"nvidia.com/gpu=1"}, annotations: map[string]string{KAIFractionAnnotation: "0.5"}, wantKey: KAIFractionAnnotation},
		{name: "KAI fraction on two cards", annotations: map[string]string{KAIFractionAnnotation: "0.5", KAINumDevicesAnnotation: "2"}, want: Request{Count: 2, Milli: 500}},
		{name: "KAI memory on three cards", annotations: map[string]string{KAIMemoryAnnotation: "2000", KAINumDevicesAnnotation: "3"}, want: Request{Count: 3, GPUMemMiB: 2000}},
		{name: "KAI devices without a share", annotations: map[string]string{KAINumDevicesAnnotation: "2"}, wantKey: KAINumDevicesAnnotation},
		{name: "KAI devices zero", annotations: map[string]string{KAIFractionAnnotation: "0.5", KAINumDevicesAnnotation: "0"}, wantKey: KAINumDevicesAnnotation},
		{name: "KAI devices and aisched's cards disagree", annotations: map[string]string{KAIFractionAnnotation: "0.5", KAINumDevicesAnnotation: "2", CardsAnnotation: "3"},
			wantKey: KAINumDevicesAnnotation},
		{name: "KAI fraction on one card", annotations: map[string]string{KAIFractionAnnotation: "0.25", KAINumDevicesAnnotation: "1"}, want: Request{Count: 1, Milli: 250}},
		{name: "KAI and aisched disagree", annotations: map[string]string{KAIFractionAnnotation: "0.5", MilliAnnotation: "300"}, wantKey: KAIFractionAnnotation},
		{name: "Volcano vGPU", limits: []string{"volcano.sh/vgpu-number=1", "volcano.sh/vgpu-memory=3000"}, wantKey: "resources.limits[volcano.sh/vgpu-memory]"},
		{name: "cGPU", limits: []string{"aliyun.com/gpu-mem=4"}, wantKey: "resources.limits[aliyun.com/gpu-mem]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkParse(t, limitsPod(tc.annotations, tc.limits...), tc.want, tc.wantKey)
		})
	}
}

// A value pasted into an annotation is not repeated whole on the pod.
func TestRequestErrorBounded(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{MilliAnnotation: strings.Repeat("9", 10205)}}}
	_, err := ParseRequest(pod)
	if err == nil {
		t.Fatal("no error for a 10205-digit share")
	}
	if msg := err.Error(); len(msg) > 300 || !strings.Contains(msg, "(10205 bytes)") || !strings.Contains(msg, MilliAnnotation) {
		t.Errorf("error of %d bytes: %s; want the key, the value cut with its length, and the reason", len(msg), msg)
	}
}
