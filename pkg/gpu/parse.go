package gpu

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// ParseRequest reads the GPU request of a pod, in aisched's form or a
// peer's: each form is first turned into the canonical request
// (canonical.go), which one parser reads. Pods without nvidia.com/gpu and
// without GPU annotations get a zero Request; every inconsistency, and
// every form aisched cannot honour, is a *RequestError.
func ParseRequest(pod *corev1.Pod) (Request, error) {
	var c canonical
	c.read(pod.Annotations, resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	return c.request()
}

// request is the Request c gives. It checks, in order: the card count,
// the share, the least memory and cores of each card, the lists of
// models and UUIDs, and that per-card constraints have cards.
func (c *canonical) request() (Request, error) {
	if err := c.checkCount(); err != nil {
		return Request{}, err
	}
	r := Request{Count: c.gpus.n}
	var words named
	var err error
	if words.share, err = c.share(&r); err != nil {
		return Request{}, err
	}
	if err := c.perCard(&r, &words); err != nil {
		return Request{}, err
	}
	if err := c.lists(&r, &words); err != nil {
		return Request{}, err
	}
	if r.Count == 0 {
		for _, f := range []*readings{&c.memory, &c.cores, &c.models, &c.excludeModels, &c.uuids, &c.excludeUUIDs} {
			if k, ok := f.first(); ok {
				return Request{}, &RequestError{Key: k.key, Value: k.raw, Reason: "the pod requests no nvidia.com/gpu; per-card constraints need a card count in resources.limits[nvidia.com/gpu] or a share in " + MilliAnnotation}
			}
		}
	}
	if words != (named{}) {
		named := words // on the heap only when the pod names a constraint
		r.named = &named
	}
	return r, nil
}

// checkCount checks nvidia.com/gpu, that the pod uses no refused form,
// and that every key that repeats the card count agrees with it.
func (c *canonical) checkCount() error {
	if err := c.gpus.err(); err != nil {
		return err
	}
	if err := c.refused.err(); err != nil {
		return err
	}
	if err := c.gpusAgain.check(); err != nil {
		return err
	}
	for _, k := range c.gpusAgain.all() {
		switch {
		case c.gpus.n == 0:
			return &RequestError{Key: k.key, Value: k.raw, Reason: "the pod requests no nvidia.com/gpu; set resources.limits[nvidia.com/gpu] to the same count"}
		case k.n != c.gpus.n:
			return &RequestError{Key: k.key, Value: k.raw, Reason: fmt.Sprintf("disagrees with the nvidia.com/gpu request of %d", c.gpus.n)}
		}
	}
	return nil
}

// share reads a share of each of the pod's cards into r: its compute,
// its memory in MiB or in percent, which every key that gives them must
// agree on, and its cards. A share in annotations comes without
// nvidia.com/gpu, its cards counted by gpu.aisched.io/cards, one by
// default; a share in resources (HAMi's) comes with nvidia.com/gpu, its
// number of cards. memoryWords are the key and value that gave the
// memory, for messages.
func (c *canonical) share(r *Request) (memoryWords string, err error) {
	size := [...]*readings{&c.milli, &c.gpuMem, &c.gpuMemPercent}
	var agreed [len(size)]int64
	for _, f := range size {
		if err := f.check(); err != nil {
			return "", err
		}
	}
	for i, f := range size {
		if agreed[i], err = f.agreed(); err != nil {
			return "", err
		}
	}
	if err := c.shareCards.check(); err != nil {
		return "", err
	}
	cards, err := c.shareCards.agreed()
	if err != nil {
		return "", err
	}
	if err := c.checkShare(agreed[0], r.Count); err != nil {
		return "", err
	}
	if _, isShare := c.firstShare(); !isShare || (agreed[0] == WholeCardMilli && c.shareInResources) {
		// No share; or HAMi's gpucores of 100, all of each card's
		// compute: whole cards, whatever memory it names.
		return "", nil
	}
	if !c.shareInResources {
		r.Count = max(cards, 1)
	}
	r.Milli, r.GPUMemMiB, r.GPUMemPercent = agreed[0], agreed[1], agreed[2]
	mem, ok := c.gpuMem.first()
	if !ok {
		mem, ok = c.gpuMemPercent.first()
	}
	if !ok {
		return "", nil
	}
	return keyValue(mem.key, mem.raw), nil
}

// firstShare is the first key that gives a share: of compute, else of
// memory in MiB, else in percent.
func (c *canonical) firstShare() (reading, bool) {
	for _, f := range [...]*readings{&c.milli, &c.gpuMem, &c.gpuMemPercent} {
		if r, ok := f.first(); ok {
			return r, true
		}
	}
	return reading{}, false
}

// checkShare checks that a share's parts fit together and with the
// pod's nvidia.com/gpu request, gpus; milli is its compute.
func (c *canonical) checkShare(milli, gpus int64) error {
	first, isShare := c.firstShare()
	cards, hasCards := c.shareCards.first()
	mem, hasMem := c.gpuMem.first()
	percent, hasPercent := c.gpuMemPercent.first()
	compute, _ := c.milli.first()
	switch {
	case !isShare && hasCards:
		return &RequestError{Key: cards.key, Value: cards.raw, Reason: "counts the cards of a share, and the pod names none: add " + MilliAnnotation + " or " + GPUMemAnnotation + ", or request whole cards in nvidia.com/gpu"}
	case !isShare:
		return nil
	case hasMem && hasPercent:
		return &RequestError{Key: percent.key, Value: percent.raw, Reason: fmt.Sprintf("the share of memory is given in MiB too (%s); keep one", mem.key)}
	case c.shareInResources && gpus == 0:
		return &RequestError{Key: first.key, Value: first.raw, Reason: "HAMi's form needs the card count beside it: resources.limits[nvidia.com/gpu]"}
	case c.shareInResources && hasCards:
		return &RequestError{Key: cards.key, Value: cards.raw, Reason: fmt.Sprintf("HAMi's form counts its cards in nvidia.com/gpu (%d); remove the annotation", gpus)}
	case !c.shareInResources && gpus > 0:
		return &RequestError{Key: first.key, Value: first.raw, Reason: fmt.Sprintf("the pod also requests %d whole nvidia.com/gpu; shared cards are not an nvidia.com/gpu request: remove it, and count the cards in %s", gpus, CardsAnnotation)}
	case milli == WholeCardMilli && !c.shareInResources:
		return &RequestError{Key: compute.key, Value: compute.raw, Reason: "a share of 1000 thousandths is a whole card: request nvidia.com/gpu instead"}
	}
	return nil
}

// perCard reads the least memory and cores of each card into r, and the
// keys that gave them into words.
func (c *canonical) perCard(r *Request, words *named) error {
	for _, f := range [...]struct {
		from  *readings
		to    *int64
		words *string
	}{{&c.memory, &r.MemoryMiB, &words.memory}, {&c.cores, &r.Cores, &words.cores}} {
		if err := f.from.check(); err != nil {
			return err
		}
		n, err := f.from.agreed()
		if err != nil {
			return err
		}
		*f.to = n
		if k, ok := f.from.first(); ok {
			*f.words = keyValue(k.key, k.raw)
		}
	}
	return nil
}

// lists reads the models and UUIDs a pod accepts or refuses into r, and
// the keys that gave them into words. Each list is given by one key.
func (c *canonical) lists(r *Request, words *named) error {
	for _, l := range [...]struct {
		from  *readings
		read  func(key, v string) ([]string, error)
		to    *[]string
		words *string
	}{
		{&c.models, modelList, &r.Models, &words.models},
		{&c.excludeModels, modelList, &r.ExcludeModels, &words.excludeModels},
		{&c.uuids, uuidList, &r.UUIDs, &words.uuids},
		{&c.excludeUUIDs, uuidList, &r.ExcludeUUIDs, &words.excludeUUIDs},
	} {
		for i, k := range l.from.all() {
			if i > 0 {
				return &RequestError{Key: k.key, Value: k.raw, Reason: "the pod names its cards with another key too; keep one"}
			}
			var err error
			if *l.to, err = l.read(k.key, k.raw); err != nil {
				return err
			}
			*l.words = keyValue(k.key, k.raw)
		}
	}
	return nil
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
