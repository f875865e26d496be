package gpu

import (
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Other projects' forms of a GPU request, read as aisched's own so that
// their users' manifests work unchanged (docs/peer-forms.md has the table):
// one function per peer turns its keys into the fields of the canonical
// request (canonical.go). A form whose meaning aisched cannot keep is
// refused with a RequestError that names the key and what to write
// instead; none is ignored.
const (
	// HAMi's resources, written in a container's limits beside
	// nvidia.com/gpu (the number of cards), and its annotations.
	HAMiGPUMemResource        corev1.ResourceName = "nvidia.com/gpumem"
	HAMiGPUCoresResource      corev1.ResourceName = "nvidia.com/gpucores"
	HAMiGPUMemPercentResource corev1.ResourceName = "nvidia.com/gpumem-percentage"
	// HAMiGPUMemAnnotation, HAMiGPUCoresAnnotation and
	// HAMiGPUMemPercentAnnotation are the same, as pod annotations:
	// nvidia.com/gpumem is GPUMemAnnotation, nvidia.com/gpucores (percent
	// of the card's cores) is MilliAnnotation times ten,
	// nvidia.com/gpumem-percentage is a share of each card's memory in
	// percent (GPUMemPercent).
	HAMiGPUMemAnnotation        = "nvidia.com/gpumem"
	HAMiGPUCoresAnnotation      = "nvidia.com/gpucores"
	HAMiGPUMemPercentAnnotation = "nvidia.com/gpumem-percentage"
	// HAMiUseTypeAnnotation and HAMiNoUseTypeAnnotation list card types
	// (comma-separated) a pod accepts or refuses; a type matches a card
	// whose model contains it ("V100" matches "Tesla V100-SXM2-32GB").
	HAMiUseTypeAnnotation   = "nvidia.com/use-gputype"
	HAMiNoUseTypeAnnotation = "nvidia.com/nouse-gputype"
	// HAMiUseUUIDAnnotation and HAMiNoUseUUIDAnnotation list card UUIDs a
	// pod accepts or refuses.
	HAMiUseUUIDAnnotation   = "nvidia.com/use-gpuuuid"
	HAMiNoUseUUIDAnnotation = "nvidia.com/nouse-gpuuuid"

	// KAIFractionAnnotation is KAI's share of one card as a decimal
	// fraction ("0.5"); KAIMemoryAnnotation its share in MiB ("2000");
	// KAINumDevicesAnnotation the number of cards the share is taken on,
	// as CardsAnnotation.
	KAIFractionAnnotation   = "gpu-fraction"
	KAIMemoryAnnotation     = "gpu-memory"
	KAINumDevicesAnnotation = "gpu-fraction-num-devices"
)

// The reasons of readings of HAMi's and KAI's shares.
const (
	percentReason  = "want a whole percent of each card's memory, 1 to 100"
	fractionReason = "want a fraction of one card above 0 and below 1, such as 0.5"
)

// The names of HAMi's resources in messages.
const (
	hamiGPUMemKey        = "resources.limits[" + string(HAMiGPUMemResource) + "]"
	hamiGPUCoresKey      = "resources.limits[" + string(HAMiGPUCoresResource) + "]"
	hamiGPUMemPercentKey = "resources.limits[" + string(HAMiGPUMemPercentResource) + "]"
)

// ofHAMi reads HAMi's forms: a share in a container's resources
// (nvidia.com/gpumem in MiB, nvidia.com/gpucores in percent of the cores,
// nvidia.com/gpumem-percentage), whose cards nvidia.com/gpu counts, or
// in annotations of the same names, as aisched's share; the card types
// and UUIDs a pod accepts or refuses. HAMi's scheduling policy and device
// mode are refused.
func ofHAMi(a map[string]string, requests corev1.ResourceList, c *canonical) {
	intAnnotation(a, HAMiGPUCoresAnnotation, 1, 100, 10, "want a percent of one card's cores, 1 to 99", &c.milli)
	inResources := intResource(requests, HAMiGPUCoresResource, hamiGPUCoresKey, 1, 100, 10, "want a percent of one card's cores, 1 to 100", &c.milli)
	intAnnotation(a, HAMiGPUMemAnnotation, 1, maxMemoryMiB, 1, memShareReason, &c.gpuMem)
	inResources = intResource(requests, HAMiGPUMemResource, hamiGPUMemKey, 1, maxMemoryMiB, 1, memShareReason, &c.gpuMem) || inResources
	intAnnotation(a, HAMiGPUMemPercentAnnotation, 1, 100, 1, percentReason, &c.gpuMemPercent)
	inResources = intResource(requests, HAMiGPUMemPercentResource, hamiGPUMemPercentKey, 1, 100, 1, percentReason, &c.gpuMemPercent) || inResources
	c.shareInResources = c.shareInResources || inResources
	if len(a) == 0 {
		return
	}
	listAnnotation(a, HAMiUseTypeAnnotation, &c.models)
	listAnnotation(a, HAMiNoUseTypeAnnotation, &c.excludeModels)
	listAnnotation(a, HAMiUseUUIDAnnotation, &c.uuids)
	listAnnotation(a, HAMiNoUseUUIDAnnotation, &c.excludeUUIDs)
	refuseAnnotation(a, "hami.io/gpu-scheduler-policy", "aisched places shares with its profile (FGD, BestFit); remove the annotation", c)
	refuseAnnotation(a, "nvidia.com/vgpu-mode", "aisched does not switch the device mode; remove the annotation", c)
}

// ofKAI reads KAI's share: gpu-fraction, a decimal fraction of one card
// ("0.5", 500 thousandths), or gpu-memory in MiB, on
// gpu-fraction-num-devices cards (gpu.aisched.io/cards).
func ofKAI(a map[string]string, c *canonical) {
	if len(a) == 0 {
		return
	}
	intAnnotation(a, KAIMemoryAnnotation, 1, maxMemoryMiB, 1, memShareReason, &c.gpuMem)
	if v, ok := a[KAIFractionAnnotation]; ok {
		c.milli.add(kaiFraction(v))
	}
	intAnnotation(a, KAINumDevicesAnnotation, 1, maxCount, 1, cardsReason, &c.shareCards)
}

// kaiFraction reads KAI's gpu-fraction as thousandths of a card.
func kaiFraction(v string) reading {
	r := reading{key: KAIFractionAnnotation, raw: v}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > 1 {
		r.bad = fractionReason
		return r
	}
	switch m := int64(math.Round(f * WholeCardMilli)); {
	case m >= WholeCardMilli:
		r.bad = "a fraction of 1 is a whole card: request nvidia.com/gpu: 1 instead"
	case m < 1:
		r.bad = "below a thousandth of a card, the smallest share aisched accounts"
	default:
		r.n = m
	}
	return r
}

// ofCGPU refuses Alibaba cGPU's resources, which aisched's request model
// cannot express.
func ofCGPU(requests corev1.ResourceList, c *canonical) {
	refuseResource(requests, "aliyun.com/gpu-count", "Alibaba cGPU: write nvidia.com/gpu for whole cards, or "+MilliAnnotation+" for a share", c)
	refuseResource(requests, "aliyun.com/gpu-mem", "Alibaba cGPU: write the share of one card's memory in MiB in "+GPUMemAnnotation, c)
}

// ofVolcano refuses Volcano's vGPU resources, naming HAMi's or aisched's
// form of the same share.
func ofVolcano(requests corev1.ResourceList, c *canonical) {
	refuseResource(requests, "volcano.sh/vgpu-cores", "Volcano's vGPU: write nvidia.com/gpu: 1 with nvidia.com/gpucores (percent), or "+MilliAnnotation, c)
	refuseResource(requests, "volcano.sh/vgpu-memory", "Volcano's vGPU: write nvidia.com/gpu: 1 with nvidia.com/gpumem (MiB), or "+GPUMemAnnotation, c)
	refuseResource(requests, "volcano.sh/vgpu-number", "Volcano's vGPU: write nvidia.com/gpu: 1 with nvidia.com/gpumem (MiB) and nvidia.com/gpucores (percent), or "+MilliAnnotation+" and "+GPUMemAnnotation, c)
}

// refuseResource records resource name, when the pod requests some of
// it, as refused, unless an earlier form was.
func refuseResource(requests corev1.ResourceList, name corev1.ResourceName, instead string, c *canonical) {
	if q, ok := requests[name]; ok && !q.IsZero() && c.refused.key == "" {
		c.refused = reading{key: "resources.limits[" + string(name) + "]", raw: q.String(), bad: "not supported: " + instead}
	}
}

// refuseAnnotation records annotation key, when the pod has it, as
// refused, unless an earlier form was.
func refuseAnnotation(a map[string]string, key, instead string, c *canonical) {
	if v, ok := a[key]; ok && c.refused.key == "" {
		c.refused = reading{key: key, raw: v, bad: "not supported: " + instead}
	}
}
