package clusterfile

import (
	"fmt"
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/aisched/aisched/pkg/gpu"
)

var (
	computeCapability = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)
	taintEffects      = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}
)

// Validate checks a decoded and defaulted cluster.
func (c *Cluster) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{Kind}))
	}
	return append(errs, ValidateNodePools(c.NodePools, field.NewPath("nodePools"))...)
}

// ValidateNodePools checks the node pools of a cluster, found at path (in a
// cluster file, or a scenario).
func ValidateNodePools(nodePools []NodePool, pools *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(nodePools) == 0 {
		errs = append(errs, field.Required(pools, "at least one node pool"))
	}
	names := sets.New[string]()
	nodes := 0
	for i := range nodePools {
		p := &nodePools[i]
		fp := pools.Index(i)
		if names.Has(p.Name) {
			errs = append(errs, field.Duplicate(fp.Child("name"), p.Name))
		}
		names.Insert(p.Name)
		errs = append(errs, p.validate(fp)...)
		nodes += p.Count
	}
	if nodes > MaxNodes {
		errs = append(errs, field.TooMany(pools, nodes, MaxNodes))
	}
	return errs
}

func (p *NodePool) validate(fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p.Name == "" {
		errs = append(errs, field.Required(fp.Child("name"), "a DNS label such as gpu-a100"))
	} else {
		for _, msg := range validation.IsDNS1123Label(p.Name) {
			errs = append(errs, field.Invalid(fp.Child("name"), p.Name, msg))
		}
	}
	if p.Count < 0 || p.Count > MaxNodes {
		errs = append(errs, field.Invalid(fp.Child("count"), p.Count, fmt.Sprintf("must be between 0 and %d", MaxNodes)))
	}
	errs = append(errs, positive(fp.Child("cpu"), p.CPU, corev1.ResourceCPU)...)
	errs = append(errs, positive(fp.Child("memory"), p.Memory, corev1.ResourceMemory)...)
	errs = append(errs, positive(fp.Child("ephemeralStorage"), p.EphemeralStorage, corev1.ResourceEphemeralStorage)...)
	if p.MaxPods < 1 || p.MaxPods > MaxPodsLimit {
		errs = append(errs, field.Invalid(fp.Child("maxPods"), p.MaxPods, fmt.Sprintf("must be between 1 and %d", MaxPodsLimit)))
	}
	for _, k := range sets.List(sets.KeySet(p.Labels)) {
		v := p.Labels[k]
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(fp.Child("labels").Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(fp.Child("labels").Key(k), v, msg))
		}
	}
	errs = append(errs, p.validateTopology(fp.Child("topology"))...)
	for i, t := range p.Taints {
		tp := fp.Child("taints").Index(i)
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(tp.Child("value"), t.Value, msg))
		}
		if !sets.New(taintEffects...).Has(t.Effect) {
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, taintEffects))
		}
	}
	if p.GPUs != nil {
		errs = append(errs, p.GPUs.validate(fp.Child("gpus"))...)
	}
	perf := fp.Child("performance")
	for _, f := range []struct {
		name  string
		value int64
	}{{"cpuMaxFrequencyMHz", p.Performance.CPUMaxFrequencyMHz}, {"networkMbps", p.Performance.NetworkMbps}, {"diskMBps", p.Performance.DiskMBps}} {
		if f.value < 0 || f.value > MaxPerfValue {
			errs = append(errs, field.Invalid(perf.Child(f.name), f.value, fmt.Sprintf("must be between 0 (the default) and %d", MaxPerfValue)))
		}
	}
	load := fp.Child("baseLoad")
	for _, f := range []struct {
		name  string
		value int32
	}{{"cpu", p.BaseLoad.CPU}, {"memory", p.BaseLoad.Memory}, {"network", p.BaseLoad.Network}, {"disk", p.BaseLoad.Disk}} {
		if f.value < 0 || f.value > 100 {
			errs = append(errs, field.Invalid(load.Child(f.name), f.value, "must be a percent between 0 and 100"))
		}
	}
	return errs
}

func (g *GPUs) validate(fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if g.Count < 1 || g.Count > MaxGPUsPerNode {
		errs = append(errs, field.Invalid(fp.Child("count"), g.Count, fmt.Sprintf("must be between 1 and %d", MaxGPUsPerNode)))
	}
	if g.Model == "" {
		errs = append(errs, field.Required(fp.Child("model"), "the card's product name, e.g. NVIDIA-A100-SXM4-40GB"))
	}
	if g.MemoryMiB <= 0 || g.MemoryMiB > maxCardMemoryMiB {
		errs = append(errs, field.Invalid(fp.Child("memoryMiB"), g.MemoryMiB, fmt.Sprintf("must be between 1 and %d", maxCardMemoryMiB)))
	}
	for _, f := range []struct {
		name  string
		value int64
	}{{"cudaCores", g.CUDACores}, {"memoryBandwidthGBps", g.MemoryBandwidthGBps}, {"maxClockMHz", g.MaxClockMHz}} {
		if f.value < 0 || f.value > MaxPerfValue {
			errs = append(errs, field.Invalid(fp.Child(f.name), f.value, fmt.Sprintf("must be between 0 and %d", MaxPerfValue)))
		}
	}
	if g.ComputeCapability != "" && !computeCapability.MatchString(g.ComputeCapability) {
		errs = append(errs, field.Invalid(fp.Child("computeCapability"), g.ComputeCapability, `must be major.minor, e.g. "8.0"`))
	}
	if g.DRA != nil {
		if err := g.DRA.Options().Validate(); err != nil {
			errs = append(errs, field.Invalid(fp.Child("dra"), g.DRA, err.Error()))
		}
	}
	return errs
}

func positive(fp *field.Path, q Quantity, name corev1.ResourceName) field.ErrorList {
	if !q.IsSet() {
		return field.ErrorList{field.Required(fp, "a quantity such as 16 or 64Gi")}
	}
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(fp, q.String(), "must be greater than 0")}
	}
	return Bounded(fp, q.Quantity, name)
}

// maxCardMemoryMiB bounds a card's memory: 1 TiB.
const maxCardMemoryMiB = 1 << 20

// Bounded says why q is more of resource name than one node can have:
// 100,000 CPUs, 1 PiB of memory, 1 EiB of storage, MaxGPUsPerNode cards,
// 10^12 of anything else. Each of those is far beyond a real node, and
// small enough that sums over MaxNodes nodes stay exact.
func Bounded(fp *field.Path, q resource.Quantity, name corev1.ResourceName) field.ErrorList {
	if q.Cmp(MaxQuantity(name)) > 0 {
		return field.ErrorList{field.Invalid(fp, q.String(), fmt.Sprintf("must be at most %s", maxOf(name)))}
	}
	return nil
}

// MaxQuantity is the most of resource name one node can have (Bounded).
func MaxQuantity(name corev1.ResourceName) resource.Quantity {
	return resource.MustParse(maxOf(name))
}

func maxOf(name corev1.ResourceName) string {
	switch name {
	case corev1.ResourceCPU:
		return "100k"
	case corev1.ResourceMemory:
		return "1Pi"
	case corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
		return "1Ei"
	case gpu.ResourceName:
		return strconv.Itoa(MaxGPUsPerNode)
	}
	return "1T"
}

// validateTopology checks a pool's topology levels: label keys, not also
// among the labels, domains of 1 to count nodes, values that are label
// values.
func (p *NodePool) validateTopology(fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(p.Topology) > MaxTopologyLevels {
		errs = append(errs, field.TooMany(fp, len(p.Topology), MaxTopologyLevels))
	}
	seen := sets.New[string]()
	for i, l := range p.Topology {
		lp := fp.Index(i)
		for _, msg := range validation.IsQualifiedName(l.Label) {
			errs = append(errs, field.Invalid(lp.Child("label"), l.Label, msg))
		}
		if _, ok := p.Labels[l.Label]; ok {
			errs = append(errs, field.Duplicate(lp.Child("label"), l.Label))
		}
		if seen.Has(l.Label) {
			errs = append(errs, field.Duplicate(lp.Child("label"), l.Label))
		}
		seen.Insert(l.Label)
		if l.Nodes < 1 || l.Nodes > MaxNodes {
			errs = append(errs, field.Invalid(lp.Child("nodes"), l.Nodes, fmt.Sprintf("must be between 1 and %d", MaxNodes)))
			continue
		}
		last := l.valuePrefix(p.Name) + strconv.Itoa(max(p.Count-1, 0)/l.Nodes)
		for _, msg := range validation.IsValidLabelValue(last) {
			errs = append(errs, field.Invalid(lp.Child("prefix"), l.Prefix, fmt.Sprintf("the values it makes, such as %q, %s", last, msg)))
		}
	}
	return errs
}
