package queuetree

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Vec is an amount of each resource of a tree, by the tree's resource
// index, in base units: thousandths of a CPU, bytes, thousandths of a
// card.
type Vec []int64

// Add adds d to v.
func (v Vec) Add(d Vec) {
	for i, x := range d {
		v[i] += x
	}
}

// Sub takes d from v.
func (v Vec) Sub(d Vec) {
	for i, x := range d {
		v[i] -= x
	}
}

// IsZero reports whether v has nothing of any resource.
func (v Vec) IsZero() bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// Cards reports whether a resource is counted in thousandths of a card.
func Cards(name string) bool {
	return name == GPU || name == SharedGPU || strings.HasPrefix(name, ModelPrefix)
}

// Resource names a tree accounts besides cpu and memory (the Queue API's).
const (
	GPU         = "nvidia.com/gpu"
	SharedGPU   = "gpu.aisched.io/shared"
	ModelPrefix = "models.gpu.aisched.io/"
)

// Quantity is an amount of resource name as a Kubernetes quantity: cards
// (2, 2.5), CPUs (500m, 4), bytes (16Gi).
func Quantity(name string, v int64) resource.Quantity {
	switch {
	case Cards(name), name == "cpu":
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return *resource.NewQuantity(v, resource.BinarySI)
}

// Base is a quantity of resource name in the tree's base unit.
func Base(name string, q resource.Quantity) int64 {
	switch {
	case Cards(name), name == "cpu":
		return q.MilliValue()
	}
	return q.Value()
}

// Format is an amount of resource name in words of a pod spec: "2.5",
// "500m", "16Gi".
func Format(name string, v int64) string {
	q := Quantity(name, v)
	return q.String()
}
