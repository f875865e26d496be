package dra

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// DRA devices: the cards of a node as a DRA driver publishes them in
// ResourceSlices, in the shape of NVIDIA's driver (kubernetes-sigs/
// dra-driver-nvidia-gpu): one device per GPU named gpu-<minor>, with the
// attributes type "gpu", uuid, productName, cudaComputeCapability and the
// capacity memory; MIG devices named gpu-<minor>-mig-..., type "mig",
// with parentUUID, profile, and the capacities memory and
// multiprocessors, consuming the counters of their card's counter set when
// the driver partitions cards dynamically; consumable shares as devices
// with allowMultipleAllocations and a memory (and optionally shares)
// capacity; health as device taints.

// Attribute values and names of NVIDIA's driver.
const (
	draTypeGPU = "gpu"
	draTypeMIG = "mig"

	draAttrType        = "type"
	draAttrUUID        = "uuid"
	draAttrParentUUID  = "parentUUID"
	draAttrProduct     = "productName"
	draAttrProfile     = "profile"
	draAttrCompute     = "cudaComputeCapability"
	draCapMemory       = "memory"
	draCapShares       = "shares"
	draCapProcessors   = "multiprocessors"
	draCounterMemory   = "memory"
	draCounterMultiSMs = "multiprocessors"
)

// DeviceRef names a device of the GPU driver: its pool and its name.
type DeviceRef struct {
	Pool, Device string
}

// Device is a device of the GPU driver as the ledger sees it.
type Device struct {
	DeviceRef
	// Card is the index of the card the device is, or, for a MIG device,
	// the card it is a part of.
	Card int
	// MIG is true for a MIG device; Profile is its MIG profile ("1g.10gb").
	MIG     bool
	Profile string
	// Part is what a MIG device takes of its card: its multiprocessors
	// (else its memory) as thousandths of the card's, and its memory. Zero
	// for a whole card.
	Part gpuledger.Share
	// MemoryMiB is the device's memory.
	MemoryMiB int64
	// Shareable devices are allocated to several claims, each consuming
	// some of their capacity (allowMultipleAllocations).
	Shareable bool
	// Shares is the device's shares capacity (the driver's integer
	// consumable shares); 0 without one.
	Shares int64
	// Healthy is false when a NoSchedule or NoExecute taint is on the device.
	Healthy bool
	// ComputeCapability is its card's, major + minor/10; 0 when unknown.
	ComputeCapability float64
}

// nodeDevices is what the GPU driver publishes for one node: its cards and
// their devices.
type nodeDevices struct {
	set     *gpu.Set
	devices map[DeviceRef]*Device
	// raw are the devices as the slices publish them; keys their shapes
	// (shapeKey), set when the node joins the shape index.
	raw  map[DeviceRef]*resourceapi.Device
	keys map[DeviceRef]string
}

// draAttr returns the attribute name of the device, unqualified or in the
// driver's domain.
func draAttr(d *resourceapi.Device, driver, name string) (resourceapi.DeviceAttribute, bool) {
	if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok {
		return a, true
	}
	a, ok := d.Attributes[resourceapi.QualifiedName(driver+"/"+name)]
	return a, ok
}

func draString(d *resourceapi.Device, driver, name string) string {
	a, _ := draAttr(d, driver, name)
	if a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// draCapacity returns the value of the device's capacity name, 0 when it
// has none.
func draCapacity(d *resourceapi.Device, driver, name string) int64 {
	c, ok := d.Capacity[resourceapi.QualifiedName(name)]
	if !ok {
		c, ok = d.Capacity[resourceapi.QualifiedName(driver+"/"+name)]
	}
	if !ok {
		return 0
	}
	return c.Value.Value()
}

// draHealthy reports whether no taint keeps pods off the device.
func draHealthy(d *resourceapi.Device) bool {
	for _, t := range d.Taints {
		if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
			return false
		}
	}
	return true
}

// minorOf reads the minor number of a card from a device name of NVIDIA's
// driver: gpu-3 and gpu-3-mig-... are of card 3; -1 for other names.
func minorOf(name string) int {
	rest, ok := strings.CutPrefix(name, "gpu-")
	if !ok {
		return -1
	}
	digits, _, _ := strings.Cut(rest, "-")
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || n >= gpuledger.MaxCards {
		return -1
	}
	return n
}

// capabilityOf reads cudaComputeCapability (a version, "8.0.0") as
// major + minor/10.
func capabilityOf(d *resourceapi.Device, driver string) float64 {
	a, _ := draAttr(d, driver, draAttrCompute)
	v := ptr.Deref(a.VersionValue, ptr.Deref(a.StringValue, ""))
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil || mi < 0 || mi > 9 {
		return 0
	}
	return float64(ma) + float64(mi)/10
}

// buildNode returns a node's cards and devices from the driver's
// slices of the node, nil when they hold no GPU. Only the slices of each
// pool's newest generation count, as upstream's allocator counts them. A
// card is each GPU device, and the parent of each MIG device that is not
// published as a GPU (MIG mode turned on statically); MIG devices are
// parts of their card. Devices of other types (vfio) are left out.
func buildNode(driver string, list []*resourceapi.ResourceSlice) *nodeDevices {
	sets, gpus, migs := publishedOf(driver, list)
	if len(gpus) == 0 && len(migs) == 0 {
		return nil
	}
	n := &nodeDevices{devices: map[DeviceRef]*Device{}, raw: map[DeviceRef]*resourceapi.Device{}}
	cards := newCardTable()
	for _, p := range gpus {
		n.addGPU(driver, cards, p, sets)
	}
	for _, p := range migs {
		n.addMIG(driver, cards, p, sets)
	}
	for _, c := range cards.cards {
		if c.synthesized && c.MemoryMiB == 0 {
			c.MemoryMiB = c.migMemMiB
		}
	}
	// A MIG device's part of its card, now that the cards are complete.
	for _, p := range migs {
		dev := n.devices[p.ref]
		dev.Part = partOfCard(dev, p.processors, cards.byIndex[dev.Card])
	}
	out := make([]gpu.Card, 0, len(cards.cards))
	for _, c := range cards.cards {
		out = append(out, c.Card)
	}
	slices.SortFunc(out, func(a, b gpu.Card) int { return cmp.Compare(a.Index, b.Index) })
	n.set = gpu.NewSet(out)
	return n
}

// counters are what a counter set of a slice holds of a card.
type counters struct{ memMiB, processors int64 }

// publishedOf reads the slices of the pools' newest generations: their
// counter sets by name, and their GPU and MIG devices.
func publishedOf(driver string, list []*resourceapi.ResourceSlice) (sets map[string]counters, gpus, migs []*published) {
	newest := map[string]int64{}
	for _, s := range list {
		newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
	}
	sets = map[string]counters{}
	for _, s := range list {
		if s.Spec.Driver != driver || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		for _, cs := range s.Spec.SharedCounters {
			c := counters{}
			if v, ok := cs.Counters[draCounterMemory]; ok {
				c.memMiB = v.Value.Value() >> 20
			}
			if v, ok := cs.Counters[draCounterMultiSMs]; ok {
				c.processors = v.Value.Value()
			}
			sets[cs.Name] = c
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			p := &published{ref: DeviceRef{Pool: s.Spec.Pool.Name, Device: d.Name}, d: d}
			for _, c := range d.ConsumesCounters {
				p.counterSet = c.CounterSet
			}
			switch draString(d, driver, draAttrType) {
			case draTypeGPU:
				gpus = append(gpus, p)
			case draTypeMIG:
				migs = append(migs, p)
			}
		}
	}
	return sets, gpus, migs
}

// addGPU adds a GPU device: a card of the node, and its device.
func (n *nodeDevices) addGPU(driver string, cards *cardTable, p *published, sets map[string]counters) {
	d := p.d
	card := cards.add(minorOf(d.Name), draString(d, driver, draAttrUUID), p.counterSet)
	card.Model = draString(d, driver, draAttrProduct)
	card.MemoryMiB = draCapacity(d, driver, draCapMemory) >> 20
	card.ComputeCapability = capabilityOf(d, driver)
	card.Healthy = draHealthy(d)
	card.processors = draCapacity(d, driver, draCapProcessors)
	if c, ok := sets[p.counterSet]; ok {
		card.MemoryMiB = max(card.MemoryMiB, c.memMiB)
		card.processors = max(card.processors, c.processors)
	}
	n.raw[p.ref] = d
	n.devices[p.ref] = &Device{DeviceRef: p.ref, Card: card.Index, MemoryMiB: card.MemoryMiB,
		Shareable: ptr.Deref(d.AllowMultipleAllocations, false), Shares: draCapacity(d, driver, draCapShares),
		Healthy: card.Healthy, ComputeCapability: card.ComputeCapability}
}

// addMIG adds a MIG device to its card, which it makes when the driver
// publishes no GPU device of it (MIG mode turned on statically).
func (n *nodeDevices) addMIG(driver string, cards *cardTable, p *published, sets map[string]counters) {
	d := p.d
	card := cards.parent(draString(d, driver, draAttrParentUUID), minorOf(d.Name), p.counterSet)
	if card == nil {
		card = cards.add(minorOf(d.Name), draString(d, driver, draAttrParentUUID), p.counterSet)
		card.Model = draString(d, driver, draAttrProduct)
		card.ComputeCapability = capabilityOf(d, driver)
		card.synthesized = true
	}
	mem := draCapacity(d, driver, draCapMemory) >> 20
	if c, ok := sets[p.counterSet]; ok {
		card.MemoryMiB = max(card.MemoryMiB, c.memMiB)
		card.processors = max(card.processors, c.processors)
	}
	if card.synthesized {
		// A card known only by its MIG devices: healthy while one is,
		// as large as its devices together when no counter says more.
		card.Healthy = card.Healthy || draHealthy(d)
		card.migMemMiB += mem
	}
	n.raw[p.ref] = d
	n.devices[p.ref] = &Device{DeviceRef: p.ref, Card: card.Index, MIG: true, Profile: draString(d, driver, draAttrProfile),
		MemoryMiB: mem, Shareable: ptr.Deref(d.AllowMultipleAllocations, false), Shares: draCapacity(d, driver, draCapShares),
		Healthy: draHealthy(d), ComputeCapability: card.ComputeCapability}
	p.processors = draCapacity(d, driver, draCapProcessors)
}

// partOfCard is what a MIG device (of processors multiprocessors) takes
// of its card: its multiprocessors (else its memory) as thousandths of
// the card's, at least one and at most the card, and its memory.
func partOfCard(dev *Device, processors int64, card *draCard) gpuledger.Share {
	milli := int64(0)
	switch {
	case processors > 0 && card.processors > 0:
		milli = processors * gpu.WholeCardMilli / card.processors
	case card.MemoryMiB > 0:
		milli = dev.MemoryMiB * gpu.WholeCardMilli / card.MemoryMiB
	}
	return gpuledger.Share{Milli: min(max(milli, 1), gpu.WholeCardMilli), MemMiB: dev.MemoryMiB}
}

// published is a device of a slice, while a node is built.
type published struct {
	ref        DeviceRef
	d          *resourceapi.Device
	counterSet string
	processors int64
}

// draCard is a card while a node is built.
type draCard struct {
	gpu.Card
	counterSet  string
	processors  int64
	synthesized bool
	migMemMiB   int64
}

// cardTable gives the cards of a node their indices: the minor number of
// the device name when it is free, else the lowest free index.
type cardTable struct {
	cards   []*draCard
	byIndex map[int]*draCard
}

func newCardTable() *cardTable { return &cardTable{byIndex: map[int]*draCard{}} }

func (t *cardTable) add(minor int, uuid, counterSet string) *draCard {
	idx := minor
	if _, taken := t.byIndex[idx]; idx < 0 || taken {
		idx = 0
		for {
			if _, taken := t.byIndex[idx]; !taken {
				break
			}
			idx++
		}
	}
	c := &draCard{Card: gpu.Card{Index: idx, UUID: uuid}, counterSet: counterSet}
	t.cards = append(t.cards, c)
	t.byIndex[idx] = c
	return c
}

// parent finds the card of a MIG device: by its parent's UUID, else the
// counter set both consume, else the minor number in its name.
func (t *cardTable) parent(uuid string, minor int, counterSet string) *draCard {
	for _, c := range t.cards {
		if uuid != "" && c.UUID == uuid || counterSet != "" && c.counterSet == counterSet {
			return c
		}
	}
	if uuid == "" && counterSet == "" {
		return t.byIndex[minor]
	}
	return nil
}
