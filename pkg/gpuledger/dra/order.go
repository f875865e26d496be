package dra

import (
	"cmp"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Device order: the one policy by which aisched chooses among a node's DRA
// devices, as the card ledger's Usage.Pick chooses among its cards. Upstream's allocator
// takes the first devices of a slice that fit a claim; GPUClaims hands it
// the devices in this order, so that the first that fits is the best:
//
//  1. healthy devices first (a tainted device is never given unless the
//     claim tolerates the taint, and then last);
//  2. devices of cards already in use, the least free first: shares and
//     MIG devices pack onto cards that are split already (best fit, as
//     PickShared), and whole cards stay whole; a card held whole comes last,
//     nothing of it can be given;
//  3. the smallest device: the least memory (best fit, as PickWhole; a MIG
//     device's memory is its part of the card);
//  4. the lower compute capability: the better cards stay for the claims
//     that ask for them;
//  5. the card index, then the device name.

// CompareDevices orders two devices of the view's node: negative when a
// is to be tried before b.
func (v View) CompareDevices(a, b *Device) int {
	return cmp.Or(
		cmp.Compare(v.standing(a), v.standing(b)),
		cmp.Compare(v.free(a), v.free(b)),
		cmp.Compare(a.MemoryMiB, b.MemoryMiB),
		cmp.Compare(a.ComputeCapability, b.ComputeCapability),
		cmp.Compare(a.Card, b.Card),
		strings.Compare(a.Device, b.Device),
	)
}

// standing ranks a device by its health and its card's use: 0 for a
// healthy device on a card in part in use, 1 on a free card, 2 on a card
// held whole, 3 for an unhealthy device.
func (v View) standing(d *Device) int {
	switch {
	case !d.Healthy:
		return 3
	case v.Usage.Whole(d.Card):
		return 2
	case v.Usage.Used(d.Card):
		return 0
	}
	return 1
}

// free is what is free of the device's card, in thousandths, for devices
// on cards in use (0 for the others: they tie).
func (v View) free(d *Device) int64 {
	if !v.Usage.Used(d.Card) || v.Cards == nil {
		return 0
	}
	for i := range v.Cards.Cards {
		if c := &v.Cards.Cards[i]; c.Index == d.Card {
			return v.Usage.FreeOn(c)
		}
	}
	return 0
}

// ClaimPlan is what a gang's solution gives one member (the job queue
// solves a gang's claims together): the node and the devices its claims
// get there. GPUClaims steers the member to exactly them.
type ClaimPlan struct {
	Node    string
	Devices []DeviceRef
}

// Ordered returns the slice with its devices in the view's order of
// preference (CompareDevices); the slice itself when they are in that
// order already. Devices the ledger does not count (another type) keep
// their place after the others. Upstream's allocator tries a slice's
// devices in order: given this slice, the first it takes is the best.
func (v View) Ordered(sl *resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
	pool := sl.Spec.Pool.Name
	idx := make([]int, len(sl.Spec.Devices))
	for i := range idx {
		idx[i] = i
	}
	dev := func(i int) *Device {
		return v.Devices[DeviceRef{Pool: pool, Device: sl.Spec.Devices[i].Name}]
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		da, db := dev(a), dev(b)
		switch {
		case da == nil && db == nil:
			return 0
		case da == nil:
			return 1
		case db == nil:
			return -1
		}
		return v.CompareDevices(da, db)
	})
	if slices.IsSorted(idx) {
		return sl
	}
	out := *sl
	out.Spec.Devices = make([]resourceapi.Device, len(idx))
	for i, j := range idx {
		out.Spec.Devices[i] = sl.Spec.Devices[j]
	}
	return &out
}

// KeepDevices returns the slice with only the devices keep keeps, in their
// order; the slice itself when it keeps all. A caller that hides devices
// from upstream's allocator must keep every device that holds an
// allocation (AllocatedDevices): the allocator counts the shared counters
// such a device consumes from its entry in the slice.
func KeepDevices(sl *resourceapi.ResourceSlice, keep func(device string) bool) *resourceapi.ResourceSlice {
	out := *sl
	out.Spec.Devices = nil
	for i := range sl.Spec.Devices {
		if keep(sl.Spec.Devices[i].Name) {
			out.Spec.Devices = append(out.Spec.Devices, sl.Spec.Devices[i])
		}
	}
	if len(out.Spec.Devices) == len(sl.Spec.Devices) {
		return sl
	}
	return &out
}

// AllocatedDevices are the devices that hold an allocation in s: whole,
// or some of their capacity.
func AllocatedDevices(s *structured.AllocatedState) sets.Set[structured.DeviceID] {
	out := s.AllocatedDevices.Clone()
	for id := range s.AllocatedSharedDeviceIDs {
		out.Insert(id.GetDeviceID())
	}
	for id := range s.AggregatedCapacity {
		out.Insert(id)
	}
	return out
}
