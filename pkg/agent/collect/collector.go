package collect

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Collector reads counters under Root ("/" on a real node; a fixture tree in
// tests). The zero value reads the real node.
type Collector struct {
	// Root is the directory that holds proc/ and sys/; empty means "/". An
	// agent in a container with the host's /proc and /sys mounted at
	// /host/proc and /host/sys sets it to "/host". Either way the agent
	// needs hostNetwork: /proc/net/dev and /sys/class/net show the network
	// namespace of the reader, not of the node.
	Root string
	// Interfaces, when non-empty, limits network accounting to these names;
	// otherwise every interface except loopback and virtual ones (those
	// without /sys/class/net/<if>/device, e.g. veth, docker0, cni0,
	// flannel.1) counts. Virtual interfaces are left out by default because
	// their traffic also crosses a physical NIC or never leaves the node, and
	// counting it twice would overstate the load.
	Interfaces []string
	// Disks, when non-empty, limits disk accounting to these block devices
	// (names as in /proc/diskstats); otherwise whole physical disks (entries
	// of /sys/block that have a /sys/block/<d>/device; no partitions, loop,
	// ram, dm-) count. Partitions and device-mapper volumes are left out by
	// default because their busy time is already part of their disk's.
	Disks []string
}

// Snapshot is one reading of the cumulative counters at Time. Each part is
// nil when its source could not be read.
type Snapshot struct {
	Time time.Time
	// CPU comes from the "cpu" line of /proc/stat.
	CPU *CPUCounters
	// Memory comes from /proc/meminfo.
	Memory *MemoryReading
	// Network comes from /proc/net/dev and /sys/class/net/<if>/speed.
	Network *NetworkCounters
	// Disk comes from /proc/diskstats.
	Disk *DiskCounters
}

// CPUCounters are the cumulative jiffies of all CPUs, from the "cpu" line of
// /proc/stat.
type CPUCounters struct {
	// Total is user+nice+system+idle+iowait+irq+softirq+steal. Guest time is
	// left out because the kernel already counts it in user and nice.
	Total uint64
	// Idle is idle+iowait: a CPU waiting for I/O is free to run another
	// task.
	Idle uint64
}

// MemoryReading is the memory of the node, from /proc/meminfo.
type MemoryReading struct {
	// TotalBytes is MemTotal.
	TotalBytes int64
	// AvailableBytes is MemAvailable, the kernel's estimate of what new
	// work can get without swapping (free memory plus reclaimable cache).
	AvailableBytes int64
}

// NetworkCounters are the counted interfaces, sorted by name.
type NetworkCounters struct {
	Interfaces []InterfaceCounters
}

// InterfaceCounters is one interface of /proc/net/dev.
type InterfaceCounters struct {
	Name string
	// Bytes is received plus transmitted bytes.
	Bytes uint64
	// SpeedMbps is the link speed from /sys/class/net/<if>/speed, 0 when
	// unknown (no file, link down, or -1 as virtio and many VMs report).
	SpeedMbps int64
}

// DiskCounters are the counted disks, sorted by name.
type DiskCounters struct {
	Disks []DiskCounter
}

// DiskCounter is one block device of /proc/diskstats.
type DiskCounter struct {
	Name string
	// BusyMillis is the 13th field of its /proc/diskstats line (io_ticks):
	// milliseconds during which the device had I/O in flight.
	BusyMillis uint64
}

// Snapshot reads all sources. A source that fails (missing file, malformed
// line) leaves its part nil and contributes an error that names the file
// and, where relevant, the line number and field; the other sources are
// still read. The returned error is errors.Join of them (nil when all
// succeeded).
//
// A configured interface or disk that does not exist fails its source. A
// link speed that cannot be read is unknown, not an error (the kernel
// refuses to report one for a link that is down); one that is not a number
// is reported but leaves the network part in place with that speed unknown.
func (c *Collector) Snapshot(now time.Time) (Snapshot, error) {
	s := Snapshot{Time: now}
	var errs []error
	var err error
	if s.CPU, err = c.readCPU(); err != nil {
		errs = append(errs, err)
	}
	if s.Memory, err = c.readMemory(); err != nil {
		errs = append(errs, err)
	}
	if s.Network, err = c.readNetwork(); err != nil {
		errs = append(errs, err)
	}
	if s.Disk, err = c.readDisk(); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

// path returns the file at rel under the collector's root.
func (c *Collector) path(rel ...string) string {
	root := c.Root
	if root == "" {
		root = "/"
	}
	return filepath.Join(append([]string{root}, rel...)...)
}

func (c *Collector) readCPU() (*CPUCounters, error) {
	path := c.path("proc", "stat")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cpu, err := parseProcStat(path, string(data))
	if err != nil {
		return nil, err
	}
	return &cpu, nil
}

func (c *Collector) readMemory() (*MemoryReading, error) {
	path := c.path("proc", "meminfo")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	mem, err := parseMeminfo(path, string(data))
	if err != nil {
		return nil, err
	}
	return &mem, nil
}

// readNetwork can return both counters and an error: the error of a
// malformed speed file, whose interface it keeps with an unknown speed.
func (c *Collector) readNetwork() (*NetworkCounters, error) {
	path := c.path("proc", "net", "dev")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	all, err := parseNetDev(path, string(data))
	if err != nil {
		return nil, err
	}
	var counted []InterfaceCounters
	var errs []error
	for _, ifc := range all {
		if !c.countsInterface(ifc.Name) {
			continue
		}
		if ifc.SpeedMbps, err = c.linkSpeed(ifc.Name); err != nil {
			errs = append(errs, err)
		}
		counted = append(counted, ifc)
	}
	if err := notFound(path, "interfaces", c.Interfaces, counted, func(i InterfaceCounters) string { return i.Name }); err != nil {
		return nil, err
	}
	slices.SortFunc(counted, func(a, b InterfaceCounters) int { return cmp.Compare(a.Name, b.Name) })
	return &NetworkCounters{Interfaces: counted}, errors.Join(errs...)
}

func (c *Collector) countsInterface(name string) bool {
	if len(c.Interfaces) > 0 {
		return slices.Contains(c.Interfaces, name)
	}
	if name == "lo" {
		return false
	}
	// Stat, not Lstat: on a real node /sys/class/net/<if> and its device
	// are symbolic links.
	_, err := os.Stat(c.path("sys", "class", "net", name, "device"))
	return err == nil
}

// linkSpeed returns the speed of the link in Mb/s, 0 when unknown.
func (c *Collector) linkSpeed(name string) (int64, error) {
	path := c.path("sys", "class", "net", name, "speed")
	data, err := os.ReadFile(path)
	if err != nil {
		// Links that are down and most virtual devices fail the read with
		// EINVAL; no speed is known, and nothing is wrong.
		return 0, nil
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	// -1 (SPEED_UNKNOWN) is what virtio and many drivers report.
	return max(v, 0), nil
}

func (c *Collector) readDisk() (*DiskCounters, error) {
	path := c.path("proc", "diskstats")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	all, err := parseDiskstats(path, string(data))
	if err != nil {
		return nil, err
	}
	var counted []DiskCounter
	for _, d := range all {
		if c.countsDisk(d.Name) {
			counted = append(counted, d)
		}
	}
	if err := notFound(path, "disks", c.Disks, counted, func(d DiskCounter) string { return d.Name }); err != nil {
		return nil, err
	}
	slices.SortFunc(counted, func(a, b DiskCounter) int { return cmp.Compare(a.Name, b.Name) })
	return &DiskCounters{Disks: counted}, nil
}

func (c *Collector) countsDisk(name string) bool {
	if len(c.Disks) > 0 {
		return slices.Contains(c.Disks, name)
	}
	for _, virtual := range []string{"loop", "ram", "dm-"} {
		if strings.HasPrefix(name, virtual) {
			return false
		}
	}
	// Partitions are not entries of /sys/block, so the Stat fails for them.
	// Sysfs spells a "/" of a device name (cciss/c0d0) as "!".
	_, err := os.Stat(c.path("sys", "block", strings.ReplaceAll(name, "/", "!"), "device"))
	return err == nil
}

// notFound returns an error naming the entries of want that no element of
// got is named, or nil when every one is.
func notFound[T any](path, kind string, want []string, got []T, name func(T) string) error {
	var missing []string
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g T) bool { return name(g) == w }) {
			missing = append(missing, w)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s: configured %s %q not found", path, kind, missing)
}
