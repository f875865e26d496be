// Package clusterfile reads the YAML file that describes a simulated
// cluster: pools of identical nodes with CPU, memory, pod slots, labels,
// taints and GPUs. `aisched up` builds its simulated nodes from it and the
// simulator's scenarios embed the same schema.
//
// Every error names the file, the line and the field, for example
//
//	cluster.yaml:14: nodePools[1].gpus.memoryMiB: Invalid value: 0: must be between 1 and 1048576
package clusterfile

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
)

const (
	// APIVersion is the only apiVersion a cluster file may declare.
	APIVersion = "aisched.io/v1alpha1"
	// Kind is the only kind a cluster file may declare.
	Kind = "Cluster"

	// DefaultMaxPods is the pod capacity of a node whose pool sets none (the kubelet default).
	DefaultMaxPods = 110
	// MaxPodsLimit bounds maxPods: each node gets a /22 pod CIDR (1022 addresses).
	MaxPodsLimit = 1020
	// MaxNodes bounds the whole cluster: 8192 /22 pod CIDRs fill 10.128.0.0/9.
	MaxNodes = 8192
	// MaxGPUsPerNode bounds gpus.count.
	MaxGPUsPerNode = 64
	// MaxPerfValue bounds the performance figures and the cards' numbers
	// (MHz, Mbps, MB/s, cores, GB/s): ten times today's largest.
	MaxPerfValue = 10_000_000
)

// DefaultEphemeralStorage is the ephemeral-storage capacity of a node whose pool sets none.
var DefaultEphemeralStorage = resource.MustParse("100Gi")

// Cluster is the content of a cluster file.
type Cluster struct {
	// apiVersion must be aisched.io/v1alpha1.
	APIVersion string `yaml:"apiVersion"`
	// kind must be Cluster.
	Kind string `yaml:"kind"`
	// nodePools lists the pools; node names are <pool>-<index>, index from 0.
	NodePools []NodePool `yaml:"nodePools"`
}

// NodePool is a group of identical nodes.
type NodePool struct {
	// name is a DNS label; it prefixes the node names and is the value of the
	// sim.aisched.io/node-pool label.
	Name string `yaml:"name"`
	// count is the number of nodes in the pool (0 keeps the pool but adds no node).
	Count int `yaml:"count"`
	// cpu is the CPU capacity of each node, e.g. 32 or 15500m.
	CPU Quantity `yaml:"cpu"`
	// memory is the memory capacity of each node, e.g. 128Gi.
	Memory Quantity `yaml:"memory"`
	// ephemeralStorage is the ephemeral-storage capacity; +optional, default 100Gi.
	EphemeralStorage Quantity `yaml:"ephemeralStorage"`
	// maxPods is the pod capacity; +optional, default 110, at most 1020.
	MaxPods int `yaml:"maxPods"`
	// labels are added to every node of the pool.
	Labels map[string]string `yaml:"labels"`
	// topology places the pool's nodes in topology domains, coarsest level
	// first: each level's label, on node i, names its domain (racks of 18
	// nodes, blocks of 4 racks); +optional.
	Topology []TopologyLevel `yaml:"topology"`
	// taints are set on every node of the pool.
	Taints []Taint `yaml:"taints"`
	// gpus describes the cards of each node; +optional, absent for CPU-only nodes.
	GPUs *GPUs `yaml:"gpus"`
	// performance is what the nodes report as their performance in
	// NodeMetrics; +optional, each field defaulted.
	Performance Performance `yaml:"performance"`
	// baseLoad is the load of each node before any pod runs, as the nodes
	// report it in NodeMetrics (the pods they run add theirs); +optional,
	// default 0.
	BaseLoad NodeLoad `yaml:"baseLoad"`
}

// Defaults of Performance.
const (
	DefaultCPUMaxFrequencyMHz = 3000
	DefaultNetworkMbps        = 10000
	DefaultDiskMBps           = 1000
)

// Performance is the speed of a node beyond its capacity; 0 is the default.
type Performance struct {
	// cpuMaxFrequencyMHz is the highest CPU clock; default 3000.
	CPUMaxFrequencyMHz int64 `yaml:"cpuMaxFrequencyMHz"`
	// networkMbps is the link speed; default 10000.
	NetworkMbps int64 `yaml:"networkMbps"`
	// diskMBps is the disk throughput; default 1000.
	DiskMBps int64 `yaml:"diskMBps"`
}

// WithDefaults returns p with its zero fields defaulted.
func (p Performance) WithDefaults() Performance {
	if p.CPUMaxFrequencyMHz == 0 {
		p.CPUMaxFrequencyMHz = DefaultCPUMaxFrequencyMHz
	}
	if p.NetworkMbps == 0 {
		p.NetworkMbps = DefaultNetworkMbps
	}
	if p.DiskMBps == 0 {
		p.DiskMBps = DefaultDiskMBps
	}
	return p
}

// NodeLoad is a node's load, each resource in percent (0 to 100).
type NodeLoad struct {
	// cpu is the busy share of the CPUs.
	CPU int32 `yaml:"cpu"`
	// memory is the share of memory in use.
	Memory int32 `yaml:"memory"`
	// network is the share of the link speed in use.
	Network int32 `yaml:"network"`
	// disk is the busy share of the disk.
	Disk int32 `yaml:"disk"`
}

// Taint is a node taint.
type Taint struct {
	// key is a qualified name.
	Key string `yaml:"key"`
	// value is a label value; +optional.
	Value string `yaml:"value"`
	// effect is NoSchedule, PreferNoSchedule or NoExecute.
	Effect string `yaml:"effect"`
}

// GPUs describes the identical cards of each node of a pool.
type GPUs struct {
	// count is the number of cards per node (1..64).
	Count int `yaml:"count"`
	// model is the product name, e.g. NVIDIA-A100-SXM4-40GB.
	Model string `yaml:"model"`
	// memoryMiB is the memory of one card in MiB.
	MemoryMiB int64 `yaml:"memoryMiB"`
	// cudaCores is the number of CUDA cores of one card; +optional, 0 = unknown.
	CUDACores int64 `yaml:"cudaCores"`
	// computeCapability is major.minor, e.g. "8.0"; +optional.
	ComputeCapability string `yaml:"computeCapability"`
	// memoryBandwidthGBps is the memory bandwidth of one card in GB/s; +optional.
	MemoryBandwidthGBps int64 `yaml:"memoryBandwidthGBps"`
	// maxClockMHz is the maximum SM clock of one card in MHz; +optional.
	MaxClockMHz int64 `yaml:"maxClockMHz"`
	// dra publishes the cards through NVIDIA's DRA driver (gpu.nvidia.com
	// ResourceSlices, claimed with ResourceClaims) instead of NVIDIA's
	// device plugin (nvidia.com/gpu) and a GPUInventory; +optional.
	DRA *DRA `yaml:"dra"`
}

// DRA is the settings of NVIDIA's DRA driver on the nodes of a pool.
type DRA struct {
	// consumableShares is the driver's --consumable-shares: "" (off),
	// "memory", "unlimited", or a whole number of shares per card (1..1000);
	// +optional.
	ConsumableShares string `yaml:"consumableShares"`
	// mig lists the MIG devices of each card, by profile (1g.10gb), with MIG
	// turned on statically; +optional.
	MIG []string `yaml:"mig"`
	// dynamicMIG publishes each card whole and every placement of every MIG
	// profile, as partitionable devices; +optional.
	DynamicMIG bool `yaml:"dynamicMIG"`
}

// NodeCount returns the number of nodes of all pools.
func (c *Cluster) NodeCount() int {
	n := 0
	for _, p := range c.NodePools {
		n += p.Count
	}
	return n
}

// Describe says what nodes the cluster has, the cards counted per node:
// "8 nodes: 4 CPU-only, 2 with 8 nvidia.com/gpu cards per node
// (NVIDIA-A100-SXM4-40GB), 2 with 4 nvidia.com/gpu cards per node
// (Tesla-T4)".
func (c *Cluster) Describe() string {
	cpuOnly := 0
	var gpuPools []string
	for _, p := range c.NodePools {
		switch {
		case p.Count == 0:
		case p.GPUs == nil || p.GPUs.Count == 0:
			cpuOnly += p.Count
		default:
			gpuPools = append(gpuPools, fmt.Sprintf("%d with %d %s cards per node (%s)", p.Count, p.GPUs.Count, gpu.ResourceName, p.GPUs.Model))
		}
	}
	parts := gpuPools
	if cpuOnly > 0 {
		parts = append([]string{fmt.Sprintf("%d CPU-only", cpuOnly)}, gpuPools...)
	}
	return fmt.Sprintf("%d nodes: %s", c.NodeCount(), strings.Join(parts, ", "))
}

// MaxTopologyLevels bounds a pool's topology levels, as a Topology's.
const MaxTopologyLevels = 8

// TopologyLevel is one level of a pool's topology.
type TopologyLevel struct {
	// label is the node label of the level, such as example.com/rack.
	Label string `yaml:"label"`
	// nodes is how many consecutive nodes of the pool share a domain of
	// the level: node i is in domain i / nodes.
	Nodes int `yaml:"nodes"`
	// prefix starts the label's values, then the domain's number; +optional,
	// default "<pool>-<the label's last part>-": node 20 of pool gb200 with
	// nodes 18 and label example.com/rack is in gb200-rack-1.
	Prefix string `yaml:"prefix"`
}

// TopologyLabels returns the labels of node i's topology domains.
func (p *NodePool) TopologyLabels(i int) map[string]string {
	if len(p.Topology) == 0 {
		return nil
	}
	out := make(map[string]string, len(p.Topology))
	for _, l := range p.Topology {
		out[l.Label] = fmt.Sprintf("%s%d", l.valuePrefix(p.Name), i/max(l.Nodes, 1))
	}
	return out
}

func (l TopologyLevel) valuePrefix(pool string) string {
	if l.Prefix != "" {
		return l.Prefix
	}
	return pool + "-" + l.Label[strings.LastIndexByte(l.Label, '/')+1:] + "-"
}

// NodeName returns the name of node i of the pool.
func (p *NodePool) NodeName(i int) string {
	return fmt.Sprintf("%s-%d", p.Name, i)
}

// Quantity is a resource.Quantity read from a YAML scalar (16, "500m", 64Gi).
type Quantity struct {
	resource.Quantity
	// set records that the field was present in the file.
	set bool
}

// NewQuantity returns q as a Quantity that was given, for pools built in code.
func NewQuantity(q resource.Quantity) Quantity { return Quantity{Quantity: q, set: true} }

// IsSet reports whether the file gave a value.
func (q *Quantity) IsSet() bool { return q.set }

// UnmarshalYAML parses the scalar; a bad value becomes a *yaml.TypeError so
// that it carries its line like every other decoding error.
func (q *Quantity) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a quantity such as 16, 500m or 64Gi", n.Line)}}
	}
	v, err := resource.ParseQuantity(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: invalid quantity %q: want a number with an optional suffix such as 500m or 64Gi", n.Line, n.Value)}}
	}
	q.Quantity, q.set = v, true
	return nil
}

// Options are the driver settings of the DRA section.
func (d *DRA) Options() nvidiadra.Options {
	return nvidiadra.Options{ConsumableShares: d.ConsumableShares, MIG: d.MIG, DynamicMIG: d.DynamicMIG}
}
