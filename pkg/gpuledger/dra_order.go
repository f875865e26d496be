package gpuledger

import (
	"cmp"
	"strings"
)

// Device order: the one policy by which aisched chooses among a node's DRA
// devices, as Usage.Pick chooses among its cards. Upstream's allocator
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
func (v DRAView) CompareDevices(a, b *Device) int {
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
func (v DRAView) standing(d *Device) int {
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
func (v DRAView) free(d *Device) int64 {
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
