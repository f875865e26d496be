package gpu

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/aisched/aisched/pkg/util/quote"
)

// canonical is a pod's GPU request in aisched's own terms, whichever forms
// the pod wrote it in. Each field is one of aisched's keys (or, where no
// gpu.aisched.io key names it yet, a field of Request: a share of memory
// in percent, refused models, card UUIDs) with the readings of every key
// that gives it, in the units of the field. The forms fill it, one
// function each (forms.go for aisched's, peers.go for the peers'); the
// parser (parse.go) reads nothing else.
//
// It is a value of fixed size, filled on the stack, so that normalising a
// pod allocates nothing beyond what reading its values needs: the parser
// runs in the scheduler's hot path (GPUFit's PreFilter, the ledger's pod
// events).
type canonical struct {
	// gpus is nvidia.com/gpu: the whole cards, or the cards of a share
	// given in a container's resources (HAMi's form).
	gpus reading
	// gpusAgain are keys that repeat the card count; each must equal gpus.
	gpusAgain readings
	// refused is the first form of the pod aisched cannot honour; its key
	// is "" when there is none.
	refused reading

	// milli (thousandths of a card's compute), gpuMem (MiB of its
	// memory) and gpuMemPercent (percent of its memory) are a share of
	// each of the pod's cards; shareCards is the number of cards a share
	// in annotations is taken on.
	milli, gpuMem, gpuMemPercent, shareCards readings
	// shareInResources is set when the share is in a container's
	// resources (HAMi's form), whose cards nvidia.com/gpu counts.
	shareInResources bool

	// memory (MiB) and cores are the least of each card.
	memory, cores readings
	// models, excludeModels, uuids and excludeUUIDs are lists of each
	// card's acceptable or refused models and UUIDs, read by the parser
	// (their readings' raw values, n unused).
	models, excludeModels, uuids, excludeUUIDs readings
}

// read fills c from every form a pod may write its GPU request in:
// aisched's first, then each peer's. The order is that of the readings of
// each field, so that a key that disagrees with an earlier one is the one
// an error names, and the first refused form (resources before
// annotations, each in name order) is the one a pod hears of. The forms
// are called one by one, not from a list of functions, so that c stays on
// the stack.
func (c *canonical) read(a map[string]string, requests corev1.ResourceList) {
	ofAisched(a, requests, c)
	ofOKS(a, c)
	ofCGPU(requests, c)
	ofVolcano(requests, c)
	ofHAMi(a, requests, c)
	ofKAI(a, c)
}

// reading is one key's value for a field of the canonical request.
type reading struct {
	// key is the key the pod wrote: an annotation's name, or
	// resources.limits[name] for a resource.
	key string
	// raw is the value as the pod wrote it, for messages.
	raw string
	// n is the value in the field's unit; 0 for lists.
	n int64
	// bad says why the value cannot be read; "" when it can.
	bad string
}

// err is the RequestError of a reading that cannot be read; nil when it
// can.
func (r reading) err() error {
	if r.bad == "" {
		return nil
	}
	return &RequestError{Key: r.key, Value: r.raw, Reason: r.bad}
}

// maxReadings is the most keys that give one field: aisched's, HAMi's
// annotation and resource, KAI's.
const maxReadings = 4

// readings are the keys that give one field, in the order of the forms.
type readings struct {
	of [maxReadings]reading
	n  int
}

// add appends a reading; the forms give no field more than maxReadings.
func (f *readings) add(r reading) {
	f.of[f.n] = r
	f.n++
}

// all is the readings in order.
func (f *readings) all() []reading { return f.of[:f.n] }

// first is the first reading, the one messages quote; ok is false when no
// key gives the field.
func (f *readings) first() (r reading, ok bool) {
	if f.n == 0 {
		return reading{}, false
	}
	return f.of[0], true
}

// check returns the error of the first reading that cannot be read.
func (f *readings) check() error {
	for _, r := range f.all() {
		if err := r.err(); err != nil {
			return err
		}
	}
	return nil
}

// agreed is the value every reading gives, 0 for none; an error names the
// first that disagrees with the first. The readings have been checked.
func (f *readings) agreed() (int64, error) {
	first, ok := f.first()
	if !ok {
		return 0, nil
	}
	for _, r := range f.all()[1:] {
		if r.n != first.n {
			return 0, &RequestError{Key: r.key, Value: r.raw, Reason: fmt.Sprintf("disagrees with %s=%s", first.key, quote.Value(first.raw))}
		}
	}
	return first.n, nil
}
