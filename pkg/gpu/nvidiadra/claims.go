package nvidiadra

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"
)

// The claims that ask for the driver's GPUs, as the simulator's trace
// replays and the throughput benchmark create them, and the check of what
// the claims of bound pods were given, which both run once the scheduler
// is done.

// ClaimName is the name of a GPU claim's one request, and of the pod's
// claim that uses it.
const ClaimName = "gpu"

// SharesCapacity is the capacity a card published with an integer
// --consumable-shares counts its shares in.
const SharesCapacity resourceapi.QualifiedName = "shares"

// ClaimRequest is what a claim asks of the driver's GPUs.
type ClaimRequest struct {
	// Count is the number of cards, distinct ones when more than one.
	Count int64
	// Shares, when positive, is the shares capacity asked of each card
	// (cards published with an integer --consumable-shares); 0 asks for
	// whole devices, without a capacity request.
	Shares int64
	// Models, when set, are the product names (productName) a card may
	// have.
	Models []string
}

// Claim returns the claim named name in namespace that asks, in one
// request of the driver's GPU class, for what r says.
func Claim(namespace, name string, r ClaimRequest) *resourceapi.ResourceClaim {
	req := &resourceapi.ExactDeviceRequest{
		DeviceClassName: GPUClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: r.Count,
	}
	if r.Shares > 0 {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			SharesCapacity: *resource.NewQuantity(r.Shares, resource.DecimalSI)}}
	}
	if len(r.Models) > 0 {
		models := make([]string, len(r.Models))
		for i, m := range r.Models {
			models[i] = fmt.Sprintf("'%s'", m)
		}
		req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.attributes['%s'].productName in [%s]", Driver, strings.Join(models, ", "))}}}
	}
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: ClaimName, Exactly: req}}}},
	}
	if r.Count > 1 {
		// Shared devices may be given twice to one request: the cards of a
		// multi-card claim must differ.
		claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{
			Requests: []string{ClaimName}, DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(Driver + "/uuid"))}}
	}
	return claim
}

// UseClaim makes the pod's first container use the claim named claim, as
// the pod's claim ClaimName.
func UseClaim(pod *corev1.Pod, claim string) {
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: ClaimName, ResourceClaimName: ptr.To(claim)}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: ClaimName}}
}

// Given is what the driver's devices gave the claims of bound pods.
type Given struct {
	// Devices counts the devices given, a device shared by several claims
	// once per claim.
	Devices int
	// Shares sums the shares capacity the claims consume (a device given
	// whole counts all its shares).
	Shares int64
}

// CheckGiven checks what the driver's devices gave the claims of the
// bound pods among pods, and sums it. Each claim of a bound pod must be
// allocated, reserved for the pod, on devices of the pod's node (the
// driver's pool is the node); no device may be given whole to two claims,
// or whole and in shares; with shares (every card's shares capacity; 0 for
// cards published whole), each share must say how many shares it consumes,
// and no card may give more than it has.
func CheckGiven(pods []corev1.Pod, claims []resourceapi.ResourceClaim, shares int64) (Given, error) {
	byName := make(map[string]*resourceapi.ResourceClaim, len(claims))
	for i := range claims {
		byName[claims[i].Namespace+"/"+claims[i].Name] = &claims[i]
	}
	var g Given
	counted := map[string]bool{}
	held := map[string]*holding{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" {
			continue
		}
		for j := range p.Spec.ResourceClaims {
			name, _, err := resourceclaim.Name(p, &p.Spec.ResourceClaims[j])
			if err != nil {
				return g, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			if name == nil {
				continue
			}
			key := p.Namespace + "/" + *name
			c := byName[key]
			switch {
			case c == nil || c.Status.Allocation == nil:
				return g, fmt.Errorf("pod %s is bound without its claim %s allocated", p.Name, key)
			case !resourceclaim.IsReservedForPod(p, c, true):
				return g, fmt.Errorf("pod %s is bound, but its claim %s is not reserved for it", p.Name, key)
			}
			if counted[key] {
				continue
			}
			counted[key] = true
			for _, r := range c.Status.Allocation.Devices.Results {
				if r.Driver != Driver {
					continue
				}
				card := r.Pool + "/" + r.Device
				if r.Pool != p.Spec.NodeName {
					return g, fmt.Errorf("claim %s of pod %s on node %s is given device %s of another node", key, p.Name, p.Spec.NodeName, card)
				}
				h := held[card]
				if h == nil {
					h = &holding{}
					held[card] = h
				}
				n, err := h.give(key, r, shares)
				if err != nil {
					return g, fmt.Errorf("device %s: %w", card, err)
				}
				g.Devices++
				g.Shares += n
			}
		}
	}
	return g, nil
}

// holding is who a device was given to: one claim whole, or claims that
// share it and the shares they consume.
type holding struct {
	whole  string
	shared []string
	shares int64
}

// give records that claim key got the device (result r), and returns the
// shares it consumes.
func (h *holding) give(key string, r resourceapi.DeviceRequestAllocationResult, shares int64) (int64, error) {
	if r.ShareID == nil {
		switch {
		case h.whole != "":
			return 0, fmt.Errorf("given twice: whole to claim %s and to claim %s", h.whole, key)
		case len(h.shared) > 0:
			return 0, fmt.Errorf("given twice: shared with claim %s, then whole to claim %s", h.shared[0], key)
		}
		h.whole, h.shares = key, shares
		return shares, nil
	}
	if h.whole != "" {
		return 0, fmt.Errorf("given twice: whole to claim %s, then shared with claim %s", h.whole, key)
	}
	var n int64
	if shares > 0 {
		q, ok := r.ConsumedCapacity[SharesCapacity]
		if !ok {
			return 0, fmt.Errorf("shared with claim %s without a count of shares", key)
		}
		n = q.Value()
	}
	h.shared = append(h.shared, key)
	h.shares += n
	if shares > 0 && h.shares > shares {
		return 0, fmt.Errorf("given %d of its %d shares", h.shares, shares)
	}
	return n, nil
}
