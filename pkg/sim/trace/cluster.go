package trace

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aisched/aisched/pkg/clusterfile"
)

// cardMemoryMiB is the memory of one card of each model the trace names.
// The trace does not give it; the public data sheets do. The undisclosed
// models get unknownCardMemoryMiB: no pod of the trace asks for card
// memory, so it only has to be valid.
var cardMemoryMiB = map[string]int64{
	"T4": 16384, "P100": 16384, "V100M16": 16384, "V100M32": 32768, "A10": 24576,
}

const unknownCardMemoryMiB = 16384

// NodePools returns the simulated node pools of a trace's nodes: one pool
// per distinct shape (CPU, memory, cards and their model), in the order
// the shapes first appear, named "<model>-<k>" in lower case ("cpu-<k>"
// for nodes without cards). The trace's 1,213 GPU nodes come in 16 shapes.
// MaxPods is clusterfile.MaxPodsLimit: the paper's simulator has no pod
// limit per node, and a node of the trace holds at most a few hundred of
// its pods.
func NodePools(nodes []Node) []clusterfile.NodePool {
	type shape struct {
		cpu, mem int64
		gpus     int
		model    string
	}
	index := map[shape]int{}
	var pools []clusterfile.NodePool
	for _, n := range nodes {
		s := shape{n.MilliCPU, n.MemoryMiB, n.GPUs, strings.TrimSpace(n.Model)}
		if i, ok := index[s]; ok {
			pools[i].Count++
			continue
		}
		index[s] = len(pools)
		prefix := "cpu"
		if s.gpus > 0 {
			prefix = strings.ToLower(s.model)
		}
		pool := clusterfile.NodePool{
			Name:    fmt.Sprintf("%s-%d", prefix, len(pools)),
			Count:   1,
			CPU:     clusterfile.NewQuantity(*resource.NewMilliQuantity(s.cpu, resource.DecimalSI)),
			Memory:  clusterfile.NewQuantity(*resource.NewQuantity(s.mem<<20, resource.BinarySI)),
			MaxPods: clusterfile.MaxPodsLimit,
		}
		if s.gpus > 0 {
			mem, ok := cardMemoryMiB[strings.ToUpper(s.model)]
			if !ok {
				mem = unknownCardMemoryMiB
			}
			pool.GPUs = &clusterfile.GPUs{Count: s.gpus, Model: NodeModel(s.model), MemoryMiB: mem}
		}
		pools = append(pools, pool)
	}
	clusterfile.SetNodePoolDefaults(pools)
	return pools
}
