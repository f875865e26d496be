package collect

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
)

// Performance is the node's static capacity: the inputs of the scheduler's
// performance score S other than disk throughput, which
// MeasureDiskThroughput measures.
type Performance struct {
	// Cores is the number of logical CPUs: the "processor" entries of
	// /proc/cpuinfo or, where it has none (s390x), the CPUs of
	// /sys/devices/system/cpu/online.
	Cores int
	// MaxFrequencyMHz is the highest cpuinfo_max_freq of
	// /sys/devices/system/cpu/cpu*/cpufreq. Virtual machines often have no
	// cpufreq; then it is the highest "cpu MHz" of /proc/cpuinfo, the
	// current rather than the maximum frequency, which is what a VM's
	// vCPUs run at anyway. 0 when neither is known (arm64 prints no
	// "cpu MHz").
	MaxFrequencyMHz int64
	// MemoryBytes is MemTotal.
	MemoryBytes int64
	// NetworkMbps is the sum of the link speeds of the counted interfaces
	// whose speed is known.
	NetworkMbps int64
}

// Performance reads the node's capacity. Like Snapshot, it returns what it
// could read together with the errors.Join of what failed.
func (c *Collector) Performance() (Performance, error) {
	var p Performance
	var errs []error
	info, err := c.readCPUInfo()
	if err != nil {
		errs = append(errs, err)
	}
	p.Cores = info.processors
	if p.Cores == 0 {
		n, err := c.readOnlineCPUs()
		if err != nil {
			errs = append(errs, err)
		}
		p.Cores = n
	}
	p.MaxFrequencyMHz, err = c.readMaxFrequency()
	if err != nil {
		errs = append(errs, err)
	}
	if p.MaxFrequencyMHz == 0 {
		p.MaxFrequencyMHz = int64(math.Round(info.maxMHz))
	}
	mem, err := c.readMemory()
	if err != nil {
		errs = append(errs, err)
	} else {
		p.MemoryBytes = mem.TotalBytes
	}
	network, err := c.readNetwork()
	if err != nil {
		errs = append(errs, err)
	}
	if network != nil {
		for _, ifc := range network.Interfaces {
			p.NetworkMbps += ifc.SpeedMbps
		}
	}
	return p, errors.Join(errs...)
}

// cpuInfo is what Performance takes from /proc/cpuinfo.
type cpuInfo struct {
	processors int
	// maxMHz is the highest "cpu MHz", 0 when there is none.
	maxMHz float64
}

func (c *Collector) readCPUInfo() (cpuInfo, error) {
	path := c.path("proc", "cpuinfo")
	data, err := os.ReadFile(path)
	if err != nil {
		return cpuInfo{}, err
	}
	return parseCPUInfo(path, string(data))
}

// maxPlausibleMHz bounds "cpu MHz", so that a corrupt value is reported
// rather than converted to a meaningless int64.
const maxPlausibleMHz = 1e6

// parseCPUInfo counts the processors of /proc/cpuinfo and finds the highest
// "cpu MHz", in "key<tabs>: value" lines.
func parseCPUInfo(path, data string) (cpuInfo, error) {
	var info cpuInfo
	n := 0
	for line := range strings.Lines(data) {
		n++
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch key = strings.TrimSpace(key); key {
		case "processor":
			info.processors++
		case "cpu MHz":
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return cpuInfo{}, fieldError(path, n, key, err)
			}
			if !(v >= 0 && v <= maxPlausibleMHz) {
				return cpuInfo{}, fieldError(path, n, key, fmt.Errorf("%g MHz out of range", v))
			}
			info.maxMHz = max(info.maxMHz, v)
		}
	}
	return info, nil
}

func (c *Collector) readOnlineCPUs() (int, error) {
	path := c.path("sys", "devices", "system", "cpu", "online")
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseCPUList(path, string(data))
}

// parseCPUList counts the CPUs of a sysfs CPU list such as "0-3,8,10-11".
func parseCPUList(path, data string) (int, error) {
	s := strings.TrimSpace(data)
	if s == "" {
		return 0, fmt.Errorf("%s: empty CPU list", path)
	}
	count := 0
	for part := range strings.SplitSeq(s, ",") {
		first, last, isRange := strings.Cut(part, "-")
		// CPU numbers fit 16 bits (the kernel's NR_CPUS is at most 8192),
		// which keeps the count far from overflowing.
		a, err := strconv.ParseUint(first, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", path, part, err)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(last, 10, 16); err != nil {
				return 0, fmt.Errorf("%s: %q: %w", path, part, err)
			}
			if b < a {
				return 0, fmt.Errorf("%s: %q: range ends before it starts", path, part)
			}
		}
		count += int(b-a) + 1
	}
	return count, nil
}

// readMaxFrequency returns the highest cpuinfo_max_freq in MHz, 0 when no
// CPU has cpufreq.
func (c *Collector) readMaxFrequency() (int64, error) {
	dir := c.path("sys", "devices", "system", "cpu")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var maxKHz uint64
	var errs []error
	for _, e := range entries {
		if !isCPUDir(e.Name()) {
			continue
		}
		path := c.path("sys", "devices", "system", "cpu", e.Name(), "cpufreq", "cpuinfo_max_freq")
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		maxKHz = max(maxKHz, v)
	}
	return int64(maxKHz / 1000), errors.Join(errs...)
}

// isCPUDir reports whether name is that of a CPU's directory, cpu<N>, and
// not cpufreq, cpuidle and the like.
func isCPUDir(name string) bool {
	n, ok := strings.CutPrefix(name, "cpu")
	if !ok || n == "" {
		return false
	}
	for _, r := range n {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
