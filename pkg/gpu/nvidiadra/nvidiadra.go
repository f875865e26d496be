// Package nvidiadra builds the DRA objects of NVIDIA's GPU driver
// (kubernetes-sigs/dra-driver-nvidia-gpu, driver gpu.nvidia.com) for a
// node's cards, in the shape that driver publishes them: the
// ResourceSlices of its kubelet plugin and its device classes; and the
// claims that ask for its GPUs, with the check of what they were given
// (claims.go). The simulated nodes of `aisched up` and the simulator
// play the driver with it (pkg/local/nodesim), the simulator's replays and
// the throughput benchmark claim its GPUs, and tests build clusters with
// it.
//
// The shape, as the driver's cmd/gpu-kubelet-plugin publishes it:
//
//   - one pool per node, named after the node;
//   - a GPU is a device gpu-<minor> with the attributes type "gpu", uuid,
//     productName, brand, architecture, cudaComputeCapability,
//     driverVersion and cudaDriverVersion, and the capacity memory;
//   - with consumable shares (--consumable-shares=memory, unlimited or an
//     integer N), a GPU allows multiple allocations: memory gets a request
//     policy (default the whole memory, or 0), and with N a shares
//     capacity of N (default 1);
//   - with MIG turned on (static), each card is published only as its MIG
//     devices gpu-<minor>-mig-<profile>-<profileID>-<placement>, type
//     "mig", parentUUID, profile, and the capacities multiprocessors,
//     copyEngines and memory;
//   - with dynamic MIG (partitionable devices), one slice holds a counter
//     set per card (multiprocessors, memory, memory-slice-0..7), and the
//     device slices hold each full card and every placement of every MIG
//     profile, each consuming its part of the card's counters;
//   - an unhealthy card carries the taint gpu.nvidia.com/xid (NoSchedule).
package nvidiadra

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
)

// Driver is NVIDIA's driver name.
const Driver = "gpu.nvidia.com"

// Device classes the driver's Helm chart installs.
const (
	GPUClass = "gpu.nvidia.com"
	MIGClass = "mig.nvidia.com"
)

// XIDTaint is the taint the driver puts on a card with a fatal XID error.
const XIDTaint = Driver + "/xid"

// Sharing modes of --consumable-shares besides an integer.
const (
	SharingMemory    = "memory"
	SharingUnlimited = "unlimited"
)

// MaxShares bounds the integer sharing mode.
const MaxShares = 1000

// Options are the driver's settings of a node.
type Options struct {
	// ConsumableShares is --consumable-shares: "" (off), "memory",
	// "unlimited", or an integer 1..MaxShares.
	ConsumableShares string
	// MIG lists the MIG devices of every card, by profile ("1g.10gb"),
	// with MIG turned on statically; empty for none.
	MIG []string
	// DynamicMIG publishes every card whole and every placement of every
	// MIG profile, as partitionable devices sharing the card's counters.
	DynamicMIG bool
}

// Validate checks the options; errors name the option.
func (o Options) Validate() error {
	switch o.ConsumableShares {
	case "", SharingMemory, SharingUnlimited:
	default:
		n, err := strconv.Atoi(o.ConsumableShares)
		if err != nil || n < 1 || n > MaxShares {
			return fmt.Errorf("consumableShares: %q: want memory, unlimited or a whole number from 1 to %d", o.ConsumableShares, MaxShares)
		}
	}
	if len(o.MIG) > 0 && o.DynamicMIG {
		return fmt.Errorf("mig and dynamicMIG: set one of them")
	}
	slicesUsed := 0
	for i, p := range o.MIG {
		prof, err := ParseProfile(p)
		if err != nil {
			return fmt.Errorf("mig[%d]: %w", i, err)
		}
		slicesUsed += prof.Slices
	}
	if slicesUsed > computeSlices {
		return fmt.Errorf("mig: the profiles use %d compute slices; a card has %d", slicesUsed, computeSlices)
	}
	return nil
}

// Profile is a MIG profile: Slices of the card's seven compute slices and
// MemoryGB of its memory.
type Profile struct {
	Name     string
	Slices   int
	MemoryGB int64
}

// computeSlices and memorySlices are the parts of a card MIG divides.
const (
	computeSlices = 7
	memorySlices  = 8
	// smPerSlice is the multiprocessors of one compute slice (A100, H100).
	smPerSlice = 14
)

// profileIDs are NVML's GPU instance profile IDs by compute slices, the
// same on A100 and H100; placements are the starts NVML allows.
var (
	profileIDs = map[int]int{1: 19, 2: 14, 3: 9, 4: 5, 7: 0}
	placements = map[int][]int{1: {0, 1, 2, 3, 4, 5, 6}, 2: {0, 2, 4}, 3: {0, 4}, 4: {0}, 7: {0}}
	// memSlices is the memory slices a profile of so many compute slices takes.
	memSlices = map[int]int{1: 1, 2: 2, 3: 4, 4: 4, 7: 8}
)

// ParseProfile reads a MIG profile name such as 1g.10gb or 3g.40gb.
func ParseProfile(name string) (Profile, error) {
	g, mem, ok := strings.Cut(name, "g.")
	n, err1 := strconv.Atoi(g)
	m, err2 := strconv.ParseInt(strings.TrimSuffix(mem, "gb"), 10, 64)
	if !ok || err1 != nil || err2 != nil || !strings.HasSuffix(mem, "gb") || profileIDs[n] == 0 && n != 7 || m < 1 || m > 1024 {
		return Profile{}, fmt.Errorf("%q is not a MIG profile: want <compute slices>g.<memory>gb with 1, 2, 3, 4 or 7 slices, such as 1g.10gb", name)
	}
	return Profile{Name: name, Slices: n, MemoryGB: m}, nil
}

// Profiles are the MIG profiles of a card of memMiB: those of the A100
// 40GB and of the 80GB cards.
func Profiles(memMiB int64) []Profile {
	unit := max(memMiB>>10/memorySlices, 1)
	var out []Profile
	for _, n := range []int{1, 2, 3, 4, 7} {
		out = append(out, Profile{Name: fmt.Sprintf("%dg.%dgb", n, int64(memSlices[n])*unit), Slices: n, MemoryGB: int64(memSlices[n]) * unit})
	}
	return out
}

// DeviceClasses are the classes of the driver's chart: whole GPUs and MIG
// devices.
func DeviceClasses() []*resourceapi.DeviceClass {
	class := func(name, typ string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].type == '%s'", Driver, Driver, typ)}}}}}
	}
	return []*resourceapi.DeviceClass{class(GPUClass, "gpu"), class(MIGClass, "mig")}
}

// Slices returns the ResourceSlices the driver publishes for a node with
// the cards given (their Index is the minor number), named
// <node>-gpu.nvidia.com-<n>.
func Slices(node string, cards []gpu.Card, o Options) []*resourceapi.ResourceSlice {
	var devices []resourceapi.Device
	var counters []resourceapi.CounterSet
	for i := range cards {
		c := &cards[i]
		switch {
		case o.DynamicMIG:
			counters = append(counters, counterSet(c))
			devices = append(devices, partitionable(c, o)...)
		case len(o.MIG) > 0:
			devices = append(devices, staticMIG(c, o)...)
		default:
			d := gpuDevice(c)
			share(&d, o)
			devices = append(devices, d)
		}
	}
	var chunks [][]resourceapi.Device
	perSlice := resourceapi.ResourceSliceMaxDevices
	if o.DynamicMIG || slices.ContainsFunc(cards, func(c gpu.Card) bool { return !c.Healthy }) {
		perSlice = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
	}
	for len(devices) > 0 {
		n := min(perSlice, len(devices))
		chunks = append(chunks, devices[:n])
		devices = devices[n:]
	}
	total := len(chunks)
	if len(counters) > 0 {
		total += (len(counters) + resourceapi.ResourceSliceMaxCounterSets - 1) / resourceapi.ResourceSliceMaxCounterSets
	}
	var out []*resourceapi.ResourceSlice
	slice := func() *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", node, Driver, len(out))},
			Spec: resourceapi.ResourceSliceSpec{Driver: Driver, NodeName: ptr.To(node),
				Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: int64(total)}},
		}
		out = append(out, s)
		return s
	}
	for len(counters) > 0 {
		n := min(resourceapi.ResourceSliceMaxCounterSets, len(counters))
		slice().Spec.SharedCounters = counters[:n]
		counters = counters[n:]
	}
	for _, c := range chunks {
		slice().Spec.Devices = c
	}
	return out
}

func quantity(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.BinarySI) }

// architecture is the architecture of a compute capability.
func architecture(cc float64) string {
	switch {
	case cc >= 10:
		return "Blackwell"
	case cc >= 9:
		return "Hopper"
	case cc >= 8.9:
		return "Ada Lovelace"
	case cc >= 8:
		return "Ampere"
	case cc >= 7.5:
		return "Turing"
	case cc >= 7:
		return "Volta"
	case cc >= 6:
		return "Pascal"
	}
	return "unknown"
}

// commonAttributes are the attributes a card and its MIG devices share.
func commonAttributes(c *gpu.Card) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	cc := fmt.Sprintf("%.1f.0", c.ComputeCapability)
	if c.ComputeCapability == 0 {
		cc = "0.0.0"
	}
	return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"productName":           {StringValue: ptr.To(c.Model)},
		"brand":                 {StringValue: ptr.To("Nvidia")},
		"architecture":          {StringValue: ptr.To(architecture(c.ComputeCapability))},
		"cudaComputeCapability": {VersionValue: ptr.To(cc)},
		"driverVersion":         {VersionValue: ptr.To("580.95.5")},
		"cudaDriverVersion":     {VersionValue: ptr.To("13.0.0")},
	}
}

func gpuDevice(c *gpu.Card) resourceapi.Device {
	attrs := commonAttributes(c)
	attrs["type"] = resourceapi.DeviceAttribute{StringValue: ptr.To("gpu")}
	attrs["uuid"] = resourceapi.DeviceAttribute{StringValue: ptr.To(c.UUID)}
	d := resourceapi.Device{
		Name:       fmt.Sprintf("gpu-%d", c.Index),
		Attributes: attrs,
		Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: quantity(c.MemoryMiB << 20)}},
	}
	taint(&d, c)
	return d
}

func taint(d *resourceapi.Device, c *gpu.Card) {
	if !c.Healthy {
		d.Taints = []resourceapi.DeviceTaint{{Key: XIDTaint, Value: "79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	}
}

// share applies --consumable-shares to a device (applyConsumableShares).
func share(d *resourceapi.Device, o Options) {
	if o.ConsumableShares == "" {
		return
	}
	d.AllowMultipleAllocations = ptr.To(true)
	mem := d.Capacity["memory"]
	full := quantity(mem.Value.Value() >> 20 << 20)
	mem.Value = full
	step := quantity(1 << 20)
	policy := func(def, lo resource.Quantity) *resourceapi.CapacityRequestPolicy {
		return &resourceapi.CapacityRequestPolicy{Default: ptr.To(def), ValidRange: &resourceapi.CapacityRequestPolicyRange{
			Min: ptr.To(lo), Max: ptr.To(full.DeepCopy()), Step: ptr.To(step.DeepCopy())}}
	}
	switch o.ConsumableShares {
	case SharingMemory:
		mem.RequestPolicy = policy(full.DeepCopy(), step.DeepCopy())
	default:
		mem.RequestPolicy = policy(quantity(0), quantity(0))
	}
	d.Capacity["memory"] = mem
	if n, err := strconv.ParseInt(o.ConsumableShares, 10, 64); err == nil {
		shares, one := *resource.NewQuantity(n, resource.DecimalSI), *resource.NewQuantity(1, resource.DecimalSI)
		d.Capacity["shares"] = resourceapi.DeviceCapacity{Value: shares, RequestPolicy: &resourceapi.CapacityRequestPolicy{
			Default: ptr.To(one.DeepCopy()), ValidRange: &resourceapi.CapacityRequestPolicyRange{
				Min: ptr.To(one.DeepCopy()), Max: ptr.To(shares.DeepCopy()), Step: ptr.To(one.DeepCopy())}}}
	}
}

// migDevice is a MIG device of profile p at placement start on card c.
func migDevice(c *gpu.Card, p Profile, start int) resourceapi.Device {
	attrs := commonAttributes(c)
	attrs["type"] = resourceapi.DeviceAttribute{StringValue: ptr.To("mig")}
	attrs["parentUUID"] = resourceapi.DeviceAttribute{StringValue: ptr.To(c.UUID)}
	attrs["profile"] = resourceapi.DeviceAttribute{StringValue: ptr.To(p.Name)}
	attrs["uuid"] = resourceapi.DeviceAttribute{StringValue: ptr.To(fmt.Sprintf("MIG-%s-%d", strings.TrimPrefix(c.UUID, "GPU-"), start))}
	d := resourceapi.Device{
		Name:       fmt.Sprintf("gpu-%d-mig-%s-%d-%d", c.Index, strings.ReplaceAll(p.Name, ".", ""), profileIDs[p.Slices], start),
		Attributes: attrs,
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"multiprocessors": {Value: quantity(int64(p.Slices * smPerSlice))},
			"copyEngines":     {Value: quantity(int64(p.Slices))},
			"memory":          {Value: quantity(p.MemoryGB << 30)},
		},
	}
	taint(&d, c)
	return d
}

// staticMIG is a card in MIG mode: its MIG devices, placed one after the
// other.
func staticMIG(c *gpu.Card, o Options) []resourceapi.Device {
	var out []resourceapi.Device
	start := 0
	for _, name := range o.MIG {
		p, _ := ParseProfile(name)
		d := migDevice(c, p, start)
		share(&d, o)
		out = append(out, d)
		start += p.Slices
	}
	return out
}

func counterSetName(c *gpu.Card) string { return fmt.Sprintf("gpu-%d-counter-set", c.Index) }

// counterSet is a card's counters: its multiprocessors, memory and memory
// slices.
func counterSet(c *gpu.Card) resourceapi.CounterSet {
	return resourceapi.CounterSet{Name: counterSetName(c), Counters: consumption(computeSlices*smPerSlice, c.MemoryMiB<<20, 0, memorySlices)}
}

func consumption(processors, memBytes int64, start, size int) map[string]resourceapi.Counter {
	out := map[string]resourceapi.Counter{
		"multiprocessors": {Value: quantity(processors)},
		"memory":          {Value: quantity(memBytes)},
	}
	for i := start; i < start+size; i++ {
		out[fmt.Sprintf("memory-slice-%d", i)] = resourceapi.Counter{Value: quantity(1)}
	}
	return out
}

// partitionable is a card with dynamic MIG: the card whole, and every
// placement of every profile, each consuming its part of the counters.
func partitionable(c *gpu.Card, o Options) []resourceapi.Device {
	whole := gpuDevice(c)
	whole.Capacity["multiprocessors"] = resourceapi.DeviceCapacity{Value: quantity(computeSlices * smPerSlice)}
	whole.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: counterSetName(c),
		Counters: consumption(computeSlices*smPerSlice, c.MemoryMiB<<20, 0, memorySlices)}}
	share(&whole, o)
	out := []resourceapi.Device{whole}
	var migs []resourceapi.Device
	for _, p := range Profiles(c.MemoryMiB) {
		for _, start := range placements[p.Slices] {
			d := migDevice(c, p, start)
			mstart := start * memorySlices / computeSlices
			d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: counterSetName(c),
				Counters: consumption(int64(p.Slices*smPerSlice), p.MemoryGB<<30, mstart, memSlices[p.Slices])}}
			migs = append(migs, d)
		}
	}
	// The driver sorts a card's devices by name.
	slices.SortFunc(migs, func(a, b resourceapi.Device) int { return cmp.Compare(a.Name, b.Name) })
	return append(out, migs...)
}
