package nodesim

import (
	"encoding/binary"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
)

// Labels and annotations of simulated nodes and pods. Keys under
// sim.aisched.io only mean something to the simulator.
const (
	// SimulatedLabel marks nodes this package manages; stale ones are removed at start.
	SimulatedLabel = "sim.aisched.io/simulated"
	// NodePoolLabel names the cluster-file pool of a node.
	NodePoolLabel = "sim.aisched.io/node-pool"
	// RunDurationAnnotation on a pod makes its containers exit after this Go
	// duration ("90s", "5m") counted from the pod's start time.
	RunDurationAnnotation = "sim.aisched.io/run-duration"
	// ExitCodeAnnotation sets the exit code (0..255) of containers that
	// exit after the run duration; default 0.
	ExitCodeAnnotation = "sim.aisched.io/exit-code"

	// kubeletVersion is what simulated nodes report as their kubelet version.
	kubeletVersion = "v1.37.0"
	// podCIDRBits is the prefix length of each node's pod CIDR (1022 pods).
	podCIDRBits = 22
)

var (
	// podNetwork holds the per-node pod CIDRs: 8192 /22 networks.
	podNetwork = net.IPv4(10, 128, 0, 0)
	// nodeNetwork holds the node InternalIPs (172.16.0.0/12).
	nodeNetwork = net.IPv4(172, 16, 0, 0)
)

// Node is a simulated node: the object to register, its GPU inventory
// (nil for CPU-only nodes and for nodes whose cards a DRA driver
// publishes), the ResourceSlices of its DRA driver (nil for none) and the
// pool it comes from.
type Node struct {
	Object    *corev1.Node
	Inventory *aischedv1alpha1.GPUInventory
	Slices    []*resourceapi.ResourceSlice
	Pool      *clusterfile.NodePool
}

// Nodes builds the nodes of every pool of the cluster, in file order. The
// i-th node overall gets the i-th pod CIDR and node IP.
func Nodes(c *clusterfile.Cluster) []Node {
	return nodesFrom(c, 0)
}

// nodesFrom is Nodes for a cluster whose first node is the first-th overall.
func nodesFrom(c *clusterfile.Cluster, first int) []Node {
	var nodes []Node
	for p := range c.NodePools {
		pool := &c.NodePools[p]
		for i := range pool.Count {
			node := BuildNode(pool, i, first+len(nodes))
			n := Node{Object: node, Inventory: BuildInventory(pool, node.Name), Pool: pool}
			if pool.GPUs != nil && pool.GPUs.DRA != nil {
				// NVIDIA's DRA driver publishes the cards; the node has no
				// device plugin and no GPUInventory (the agent withdraws it).
				n.Slices = nvidiadra.Slices(node.Name, gpu.FromInventory(n.Inventory), pool.GPUs.DRA.Options())
				n.Inventory = nil
			}
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// BuildNode returns node i of the pool, the global-th node of the cluster,
// with spec, labels and the status a freshly started kubelet reports.
func BuildNode(pool *clusterfile.NodePool, i, global int) *corev1.Node {
	name := pool.NodeName(i)
	labels := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		SimulatedLabel:         "true",
		NodePoolLabel:          pool.Name,
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              pool.CPU.DeepCopy(),
		corev1.ResourceMemory:           pool.Memory.DeepCopy(),
		corev1.ResourceEphemeralStorage: pool.EphemeralStorage.DeepCopy(),
		corev1.ResourcePods:             *resource.NewQuantity(int64(pool.MaxPods), resource.DecimalSI),
	}
	if g := pool.GPUs; g != nil {
		// The labels GPU Feature Discovery would set on a real node; the
		// device plugin's resource unless a DRA driver publishes the cards.
		if g.DRA == nil {
			capacity[gpu.ResourceName] = *resource.NewQuantity(int64(g.Count), resource.DecimalSI)
		}
		labels[gpu.GFDPresentLabel] = "true"
		labels[gpu.GFDProductLabel] = labelValue(g.Model)
		labels[gpu.GFDCountLabel] = strconv.Itoa(g.Count)
		labels[gpu.GFDMemoryLabel] = strconv.FormatInt(g.MemoryMiB, 10)
		if major, minor, ok := strings.Cut(g.ComputeCapability, "."); ok {
			labels[gpu.GFDComputeMajorLabel] = major
			labels[gpu.GFDComputeMinorLabel] = minor
		}
	}
	for k, v := range pool.Labels {
		labels[k] = v
	}
	for k, v := range pool.TopologyLabels(i) {
		labels[k] = v
	}
	var taints []corev1.Taint
	for _, t := range pool.Taints {
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	ip := nthIP(nodeNetwork, uint32(global)+1).String()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.NodeSpec{
			PodCIDR:  podCIDR(global),
			PodCIDRs: []string{podCIDR(global)},
			Taints:   taints,
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: ip},
				{Type: corev1.NodeHostName, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               fmt.Sprintf("aisched-sim-%08d", global),
				SystemUUID:              fmt.Sprintf("aisched-sim-%08d", global),
				BootID:                  fmt.Sprintf("aisched-sim-%08d", global),
				KernelVersion:           "simulated",
				OSImage:                 "aisched simulated node",
				ContainerRuntimeVersion: "aisched-sim://" + kubeletVersion,
				KubeletVersion:          kubeletVersion,
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
}

// BuildInventory returns the GPUInventory of a node of the pool, nil when
// the pool has no GPUs. Card UUIDs are derived from the node name and index,
// so they stay the same across restarts.
func BuildInventory(pool *clusterfile.NodePool, nodeName string) *aischedv1alpha1.GPUInventory {
	g := pool.GPUs
	if g == nil {
		return nil
	}
	inv := &aischedv1alpha1.GPUInventory{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	for i := range g.Count {
		inv.Spec.GPUs = append(inv.Spec.GPUs, aischedv1alpha1.GPU{
			Index:               int32(i),
			UUID:                "GPU-" + uuid.NewSHA1(uuidSpace, fmt.Appendf(nil, "%s/%d", nodeName, i)).String(),
			Model:               g.Model,
			MemoryMiB:           g.MemoryMiB,
			CUDACores:           g.CUDACores,
			ComputeCapability:   g.ComputeCapability,
			MemoryBandwidthGBps: g.MemoryBandwidthGBps,
			MaxClockMHz:         g.MaxClockMHz,
			Health:              aischedv1alpha1.GPUHealthy,
		})
	}
	return inv
}

// uuidSpace is the name space of simulated card UUIDs.
var uuidSpace = uuid.MustParse("5b7a0c52-8f0e-4d2b-9f57-6a1d2c3e4f50")

func podCIDR(global int) string {
	return fmt.Sprintf("%s/%d", nthIP(podNetwork, uint32(global)<<(32-podCIDRBits)), podCIDRBits)
}

// nthIP returns base + n.
func nthIP(base net.IP, n uint32) net.IP {
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, binary.BigEndian.Uint32(base.To4())+n)
	return ip
}

var invalidLabelChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// labelValue turns a product name into a label value the way GFD does
// (spaces and other characters become dashes).
func labelValue(s string) string {
	v := strings.Trim(invalidLabelChars.ReplaceAllString(s, "-"), "-._")
	if len(v) > 63 {
		v = strings.TrimRight(v[:63], "-._")
	}
	return v
}

// nodeIP returns the InternalIP of a node object.
func nodeIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
