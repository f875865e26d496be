// Package podload is the load a pod is expected to put on its node: what
// it declares in the ExpectedLoadAnnotation, or else its requests. The
// LoadAware scheduler plugin adds it for pods bound since a node's last
// metrics sample, and the simulated nodes of `aisched up` report it as the
// measured load of the pods they run.
package podload

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/aisched/aisched/pkg/util/quote"
)

// ExpectedLoadAnnotation declares the load a pod puts on its node, as
// comma-separated key=value pairs, each optional:
//
//	cpu=1500m        CPU cores in use (a quantity)
//	memory=4Gi       memory in use (a quantity)
//	network=50M      bytes per second received and sent (a quantity)
//	disk=20          percent of one disk's time busy (0 to 100)
//
// A key left out is taken from the requests (cpu, memory) or is zero
// (network, disk).
const ExpectedLoadAnnotation = "scheduling.aisched.io/expected-load"

// maxQuantity bounds a declared quantity, so that a node's sum of many
// pods' loads in milli-units cannot overflow.
var maxQuantity = resource.MustParse("1P")

// Load is what a pod uses.
type Load struct {
	MilliCPU int64
	Memory   int64
	// NetworkBytesPerSecond is received plus sent.
	NetworkBytesPerSecond int64
	// DiskPercent is the busy share of one disk.
	DiskPercent int64
}

// Add returns l + o.
func (l Load) Add(o Load) Load {
	return Load{
		MilliCPU:              l.MilliCPU + o.MilliCPU,
		Memory:                l.Memory + o.Memory,
		NetworkBytesPerSecond: l.NetworkBytesPerSecond + o.NetworkBytesPerSecond,
		DiskPercent:           l.DiskPercent + o.DiskPercent,
	}
}

// Of returns the pod's expected load: the annotation where it says, the
// requests otherwise. An error names the annotation, the key and the value.
func Of(pod *corev1.Pod) (Load, error) {
	l := Requests(pod)
	v, ok := pod.Annotations[ExpectedLoadAnnotation]
	if !ok {
		return l, nil
	}
	seen := map[string]bool{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, value, found := strings.Cut(item, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !found {
			return Load{}, fmt.Errorf("annotation %s: %s is not key=value", ExpectedLoadAnnotation, quote.Value(item))
		}
		if seen[key] {
			return Load{}, fmt.Errorf("annotation %s: key %s given twice", ExpectedLoadAnnotation, quote.Value(key))
		}
		seen[key] = true
		bad := func(why string) error {
			return fmt.Errorf("annotation %s: %s=%s: %s", ExpectedLoadAnnotation, key, quote.Value(value), why)
		}
		switch key {
		case "cpu", "memory", "network":
			q, err := resource.ParseQuantity(value)
			if err != nil {
				return Load{}, bad("not a quantity (examples: 1500m, 4Gi, 50M)")
			}
			if q.Sign() < 0 {
				return Load{}, bad("must not be negative")
			}
			if q.Cmp(maxQuantity) > 0 {
				return Load{}, bad("too large (at most 1P)")
			}
			switch key {
			case "cpu":
				l.MilliCPU = q.MilliValue()
			case "memory":
				l.Memory = q.Value()
			default:
				l.NetworkBytesPerSecond = q.Value()
			}
		case "disk":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 || n > 100 {
				return Load{}, bad("must be a whole percent from 0 to 100")
			}
			l.DiskPercent = n
		default:
			return Load{}, fmt.Errorf("annotation %s: unknown key %s (want cpu, memory, network or disk)", ExpectedLoadAnnotation, quote.Value(key))
		}
	}
	return l, nil
}

// Estimate is Of for a pod whose annotation may be bad (one that was bound
// without the LoadAware plugin's check): such a pod counts with its
// requests.
func Estimate(pod *corev1.Pod) Load {
	if l, err := Of(pod); err == nil {
		return l
	}
	return Requests(pod)
}

// Requests is the load of a pod taken from its requests alone.
func Requests(pod *corev1.Pod) Load {
	r := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return Load{MilliCPU: r.Cpu().MilliValue(), Memory: r.Memory().Value()}
}
