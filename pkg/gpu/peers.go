package gpu

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Other projects' forms of a GPU request, read as aisched's own so that
// their users' manifests work unchanged (docs/peer-forms.md has the table).
// A form whose meaning aisched cannot keep is refused with a RequestError
// that names the key and what to write instead; none is ignored.
const (
	// HAMi's resources, written in a container's limits beside
	// nvidia.com/gpu (the number of cards), and its annotations.
	HAMiGPUMemResource        corev1.ResourceName = "nvidia.com/gpumem"
	HAMiGPUCoresResource      corev1.ResourceName = "nvidia.com/gpucores"
	HAMiGPUMemPercentResource corev1.ResourceName = "nvidia.com/gpumem-percentage"
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

// foreignResources are device layers' resources aisched cannot express in
// its request model, with what to write instead.
var foreignResources = map[corev1.ResourceName]string{
	"volcano.sh/vgpu-number": "Volcano's vGPU: write nvidia.com/gpu: 1 with nvidia.com/gpumem (MiB) and nvidia.com/gpucores (percent), or " + MilliAnnotation + " and " + GPUMemAnnotation,
	"volcano.sh/vgpu-memory": "Volcano's vGPU: write nvidia.com/gpu: 1 with nvidia.com/gpumem (MiB), or " + GPUMemAnnotation,
	"volcano.sh/vgpu-cores":  "Volcano's vGPU: write nvidia.com/gpu: 1 with nvidia.com/gpucores (percent), or " + MilliAnnotation,
	"aliyun.com/gpu-mem":     "Alibaba cGPU: write the share of one card's memory in MiB in " + GPUMemAnnotation,
	"aliyun.com/gpu-count":   "Alibaba cGPU: write nvidia.com/gpu for whole cards, or " + MilliAnnotation + " for a share",
}

// foreignAnnotations are annotations of device layers aisched cannot
// honour, with what to write instead.
var foreignAnnotations = map[string]string{
	"hami.io/gpu-scheduler-policy": "aisched places shares with its profile (FGD, BestFit); remove the annotation",
	"nvidia.com/vgpu-mode":         "aisched does not switch the device mode; remove the annotation",
}

// refuseForeign returns a RequestError for the first device-layer key of
// the pod that aisched cannot honour; keys in sorted order, so that the
// error is stable.
func refuseForeign(a map[string]string, requests corev1.ResourceList) error {
	for _, name := range slices.Sorted(maps.Keys(foreignResources)) {
		if q, ok := requests[name]; ok && !q.IsZero() {
			return &RequestError{Key: "resources.limits[" + string(name) + "]", Value: q.String(), Reason: "not supported: " + foreignResources[name]}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(foreignAnnotations)) {
		if v, ok := a[key]; ok {
			return &RequestError{Key: key, Value: v, Reason: "not supported: " + foreignAnnotations[key]}
		}
	}
	return nil
}

// shareCards reads the number of cards a share in annotations is taken
// on, from aisched's key and KAI's, which must agree; nil when neither is
// given.
func shareCards(a map[string]string) ([]shareValue, error) {
	var cards []shareValue
	for _, key := range []string{CardsAnnotation, KAINumDevicesAnnotation} {
		v, ok := a[key]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 1 || n > maxCount {
			return nil, &RequestError{Key: key, Value: v, Reason: fmt.Sprintf("want a whole number of cards, 1 to %d", maxCount)}
		}
		cards = append(cards, shareValue{key: key, raw: v, n: n})
	}
	if _, err := agreed(cards); err != nil {
		return nil, err
	}
	return cards, nil
}

// shareValue is one key's reading of a share: of compute in thousandths,
// or of memory in MiB.
type shareValue struct {
	key, raw string
	n        int64
}

// limitKey names a resource of a container's limits in errors.
func limitKey(name corev1.ResourceName) string { return "resources.limits[" + string(name) + "]" }

// kaiFraction reads KAI's gpu-fraction as thousandths of a card.
func kaiFraction(v string) (int64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > 1 {
		return 0, &RequestError{Key: KAIFractionAnnotation, Value: v, Reason: "want a fraction of one card above 0 and below 1, such as 0.5"}
	}
	m := int64(math.Round(f * WholeCardMilli))
	switch {
	case m >= WholeCardMilli:
		return 0, &RequestError{Key: KAIFractionAnnotation, Value: v, Reason: "a fraction of 1 is a whole card: request nvidia.com/gpu: 1 instead"}
	case m < 1:
		return 0, &RequestError{Key: KAIFractionAnnotation, Value: v, Reason: "below a thousandth of a card, the smallest share aisched accounts"}
	}
	return m, nil
}

// modelList reads a comma-separated list of card models.
func modelList(key, v string) ([]string, error) {
	var models []string
	for _, m := range strings.Split(v, ",") {
		if m = NormalizeModel(m); m == "" {
			return nil, &RequestError{Key: key, Value: v, Reason: "want comma-separated model names, none empty"}
		}
		models = append(models, m)
	}
	return models, nil
}

// uuidList reads a comma-separated list of card UUIDs.
func uuidList(key, v string) ([]string, error) {
	var uuids []string
	for _, u := range strings.Split(v, ",") {
		if u = strings.TrimSpace(u); u == "" || len(u) > 128 {
			return nil, &RequestError{Key: key, Value: v, Reason: "want comma-separated card UUIDs (GPU-...), none empty"}
		}
		uuids = append(uuids, u)
	}
	return uuids, nil
}
