package collect

import "time"

// Utilization is each resource's utilisation in [0,1] over the window
// between two snapshots. A nil pointer means unknown: the part is missing in
// either snapshot, a counter went backwards (a device was re-created, or
// the 32-bit io_ticks of /proc/diskstats wrapped), the window is empty, or,
// for the network, no counted interface has a known link speed.
type Utilization struct {
	// CPU is 1 - idle jiffies / all jiffies over the window.
	CPU *float64
	// Memory is (MemTotal-MemAvailable)/MemTotal of the later snapshot. It
	// is a level, not a rate, so it needs neither the earlier snapshot nor
	// a window.
	Memory *float64
	// Network is the bit rate of all counted interfaces over the sum of the
	// known link speeds. The traffic of an interface with an unknown speed
	// counts, but its capacity cannot, so it can push Network to 1.
	Network *float64
	// Disk is the busy fraction of the busiest counted disk: a node with
	// one saturated disk is saturated for the pods that use it.
	Disk *float64
}

// Utilize returns the utilisation over the window between prev and cur,
// each value clamped to [0,1]. Only interfaces and disks present in both
// snapshots count.
func Utilize(prev, cur Snapshot) Utilization {
	u := Utilization{Memory: memoryUtilization(cur.Memory)}
	elapsed := cur.Time.Sub(prev.Time)
	if elapsed <= 0 {
		return u
	}
	u.CPU = cpuUtilization(prev.CPU, cur.CPU)
	u.Network = networkUtilization(prev.Network, cur.Network, elapsed)
	u.Disk = diskUtilization(prev.Disk, cur.Disk, elapsed)
	return u
}

// fraction returns v clamped to [0,1].
func fraction(v float64) *float64 {
	v = min(max(v, 0), 1)
	return &v
}

func cpuUtilization(prev, cur *CPUCounters) *float64 {
	if prev == nil || cur == nil || cur.Total <= prev.Total || cur.Idle < prev.Idle {
		return nil
	}
	// Idle grows more than Total only when another counter went backwards
	// (steal time does on some hypervisors); the clamp turns that into 0.
	return fraction(1 - float64(cur.Idle-prev.Idle)/float64(cur.Total-prev.Total))
}

func memoryUtilization(m *MemoryReading) *float64 {
	if m == nil || m.TotalBytes <= 0 {
		return nil
	}
	return fraction(float64(m.TotalBytes-m.AvailableBytes) / float64(m.TotalBytes))
}

func networkUtilization(prev, cur *NetworkCounters, elapsed time.Duration) *float64 {
	if prev == nil || cur == nil {
		return nil
	}
	before := make(map[string]uint64, len(prev.Interfaces))
	for _, ifc := range prev.Interfaces {
		before[ifc.Name] = ifc.Bytes
	}
	var bytes, mbps float64
	for _, ifc := range cur.Interfaces {
		b, ok := before[ifc.Name]
		if !ok {
			continue
		}
		if ifc.Bytes < b {
			return nil
		}
		bytes += float64(ifc.Bytes - b)
		mbps += float64(max(ifc.SpeedMbps, 0))
	}
	if mbps == 0 {
		return nil
	}
	return fraction(bytes * 8 / elapsed.Seconds() / (mbps * 1e6))
}

func diskUtilization(prev, cur *DiskCounters, elapsed time.Duration) *float64 {
	if prev == nil || cur == nil {
		return nil
	}
	before := make(map[string]uint64, len(prev.Disks))
	for _, d := range prev.Disks {
		before[d.Name] = d.BusyMillis
	}
	var busiest uint64
	found := false
	for _, d := range cur.Disks {
		b, ok := before[d.Name]
		if !ok {
			continue
		}
		if d.BusyMillis < b {
			return nil
		}
		busiest = max(busiest, d.BusyMillis-b)
		found = true
	}
	if !found {
		return nil
	}
	return fraction(float64(busiest) / (elapsed.Seconds() * 1000))
}
