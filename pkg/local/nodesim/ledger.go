package nodesim

import (
	"fmt"
	"net"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// ledger is what the simulated kubelets have admitted: per node the
// resources in use and the pod IPs handed out, per pod what it holds. It is
// the kubelet's admission check, so a pod bound to a full node (by a
// scheduler bug or a hand-written spec.nodeName) fails like on a real node.
type ledger struct {
	mu    sync.Mutex
	nodes map[string]*nodeLedger
	pods  map[string]*podRecord
}

type nodeLedger struct {
	allocatable corev1.ResourceList
	maxPods     int64
	used        corev1.ResourceList
	pods        int64
	cidr        *net.IPNet
	hostIP      string
	// ips[i] is true when network address + i is taken; 0 and the last are
	// the network and broadcast addresses.
	ips  []bool
	next int
}

type podRecord struct {
	uid  types.UID
	node string
	ip   string
	// ipIndex is the host offset in the node CIDR, 0 for host-network pods.
	ipIndex  int
	requests corev1.ResourceList
}

// rejection is an admission failure as the kubelet reports it.
type rejection struct {
	Reason  string
	Message string
}

func newLedger() *ledger {
	return &ledger{nodes: map[string]*nodeLedger{}, pods: map[string]*podRecord{}}
}

// addNode registers the node as registered in the apiserver; its pod CIDR
// comes from the node object, which keeps the first one it was given.
func (l *ledger) addNode(n *corev1.Node) error {
	_, cidr, err := net.ParseCIDR(n.Spec.PodCIDR)
	if err != nil {
		return fmt.Errorf("node %s: spec.podCIDR: %w", n.Name, err)
	}
	ones, bits := cidr.Mask.Size()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nodes[n.Name] = &nodeLedger{
		allocatable: n.Status.Allocatable.DeepCopy(),
		maxPods:     n.Status.Allocatable.Pods().Value(),
		used:        corev1.ResourceList{},
		cidr:        cidr,
		hostIP:      nodeIP(n),
		ips:         make([]bool, 1<<(bits-ones)),
		next:        1,
	}
	return nil
}

// holds reports whether key is admitted with this UID.
func (l *ledger) holds(key string, uid types.UID) (ip string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.pods[key]
	if !ok || r.uid != uid {
		return "", false
	}
	return r.ip, true
}

// admit checks that the pod fits next to what the node already runs and
// records it. force skips the check; it is for pods that were already
// running before a restart.
func (l *ledger) admit(key string, uid types.UID, nodeName string, hostNetwork bool, requests corev1.ResourceList, wantIP string, force bool) (string, *rejection) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(key)
	n, ok := l.nodes[nodeName]
	if !ok {
		return "", &rejection{Reason: "NodeNotSimulated", Message: fmt.Sprintf("node %s is not simulated here", nodeName)}
	}
	if !force {
		if n.pods+1 > n.maxPods {
			return "", &rejection{Reason: "OutOfpods", Message: fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", n.pods, n.maxPods)}
		}
		for name, req := range requests {
			if req.IsZero() {
				continue
			}
			capacity, ok := n.allocatable[name]
			if !ok {
				capacity = resource.Quantity{}
			}
			used := n.used[name]
			total := used.DeepCopy()
			total.Add(req)
			if total.Cmp(capacity) > 0 {
				return "", &rejection{
					Reason:  "OutOf" + string(name),
					Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %s, used: %s, capacity: %s", name, req.String(), used.String(), capacity.String()),
				}
			}
		}
	}
	r := &podRecord{uid: uid, node: nodeName, requests: requests.DeepCopy()}
	if hostNetwork {
		r.ip = n.hostIP
	} else {
		idx := n.take(wantIP)
		if idx == 0 {
			return "", &rejection{Reason: "PodIPsExhausted", Message: fmt.Sprintf("no free address in pod CIDR %s", n.cidr)}
		}
		r.ipIndex, r.ip = idx, nthIP(n.cidr.IP, uint32(idx)).String()
	}
	for name, q := range requests {
		sum := n.used[name]
		sum.Add(q)
		n.used[name] = sum
	}
	n.pods++
	l.pods[key] = r
	return r.ip, nil
}

// hostIP returns the InternalIP of a registered node.
func (l *ledger) hostIP(node string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.nodes[node]; ok {
		return n.hostIP
	}
	return ""
}

// release frees what key holds; releasing an unknown key does nothing.
func (l *ledger) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(key)
}

func (l *ledger) releaseLocked(key string) {
	r, ok := l.pods[key]
	if !ok {
		return
	}
	delete(l.pods, key)
	n, ok := l.nodes[r.node]
	if !ok {
		return
	}
	for name, q := range r.requests {
		sum := n.used[name]
		sum.Sub(q)
		n.used[name] = sum
	}
	n.pods--
	if r.ipIndex > 0 {
		n.ips[r.ipIndex] = false
	}
}

// take reserves want when it is a free address of the CIDR, otherwise the
// next free one; 0 means none is left.
func (n *nodeLedger) take(want string) int {
	if ip := net.ParseIP(want); ip != nil && n.cidr.Contains(ip) {
		idx := int(ipToUint(ip) - ipToUint(n.cidr.IP))
		if idx > 0 && idx < len(n.ips)-1 && !n.ips[idx] {
			n.ips[idx] = true
			return idx
		}
	}
	for range len(n.ips) {
		idx := n.next
		n.next++
		if n.next >= len(n.ips)-1 {
			n.next = 1
		}
		if !n.ips[idx] {
			n.ips[idx] = true
			return idx
		}
	}
	return 0
}

func ipToUint(ip net.IP) uint32 {
	v4 := ip.To4()
	return uint32(v4[0])<<24 | uint32(v4[1])<<16 | uint32(v4[2])<<8 | uint32(v4[3])
}
