package collect

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// The parsers take the file's path only to name it in errors, and its
// content as a string so that fuzz tests can call them directly.

// errSumRange is the error of counters whose sum does not fit 64 bits.
var errSumRange = errors.New("sum of counters out of range")

// fieldError says which file, line and field is bad.
func fieldError(path string, line int, name string, err error) error {
	return fmt.Errorf("%s line %d: field %q: %w", path, line, name, err)
}

// lineError says which file and line is bad, when no one field is.
func lineError(path string, line int, format string, args ...any) error {
	return fmt.Errorf("%s line %d: %s", path, line, fmt.Sprintf(format, args...))
}

// cpuFields are the columns of the "cpu" line of /proc/stat that make up
// CPUCounters.Total; guest and guest_nice, which follow, are already part of
// user and nice.
var cpuFields = [...]string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}

// parseProcStat reads the "cpu" line of /proc/stat. Kernels before 2.6
// print only the first four columns; the later ones count when present.
func parseProcStat(path, data string) (CPUCounters, error) {
	n := 0
	for line := range strings.Lines(data) {
		n++
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		f = f[1:]
		if len(f) < 4 {
			return CPUCounters{}, lineError(path, n, "want at least 4 counters after \"cpu\", got %d", len(f))
		}
		var c CPUCounters
		for i, name := range cpuFields[:min(len(f), len(cpuFields))] {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return CPUCounters{}, fieldError(path, n, name, err)
			}
			var carry uint64
			if c.Total, carry = bits.Add64(c.Total, v, 0); carry != 0 {
				return CPUCounters{}, fieldError(path, n, name, errSumRange)
			}
			if name == "idle" || name == "iowait" {
				// Cannot overflow: Idle is part of Total.
				c.Idle += v
			}
		}
		return c, nil
	}
	return CPUCounters{}, fmt.Errorf("%s: no \"cpu\" line", path)
}

// parseMeminfo reads MemTotal and MemAvailable of /proc/meminfo. Both must
// be present: MemAvailable exists since Linux 3.14.
func parseMeminfo(path, data string) (MemoryReading, error) {
	var m MemoryReading
	var haveTotal, haveAvailable bool
	n := 0
	for line := range strings.Lines(data) {
		n++
		key, value, _ := strings.Cut(line, ":")
		var dst *int64
		switch key {
		case "MemTotal":
			dst, haveTotal = &m.TotalBytes, true
		case "MemAvailable":
			dst, haveAvailable = &m.AvailableBytes, true
		default:
			continue
		}
		v, err := parseKB(value)
		if err != nil {
			return MemoryReading{}, fieldError(path, n, key, err)
		}
		*dst = v
	}
	switch {
	case !haveTotal:
		return MemoryReading{}, fmt.Errorf("%s: no MemTotal line", path)
	case !haveAvailable:
		return MemoryReading{}, fmt.Errorf("%s: no MemAvailable line", path)
	}
	return m, nil
}

// parseKB returns the bytes of a "<n> kB" value of /proc/meminfo.
func parseKB(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("want \"<number> kB\", got %q", strings.TrimSpace(s))
	}
	v, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, err
	}
	if v < 0 || v > math.MaxInt64/1024 {
		return 0, fmt.Errorf("%d kB: %w", v, strconv.ErrRange)
	}
	return v * 1024, nil
}

// parseNetDev reads the received and transmitted bytes of every interface
// of /proc/net/dev; SpeedMbps is left 0. The first two lines are the
// header; each other line is "<name>: <8 receive counters> <8 transmit
// counters>".
func parseNetDev(path, data string) ([]InterfaceCounters, error) {
	var out []InterfaceCounters
	n := 0
	for line := range strings.Lines(data) {
		n++
		if n <= 2 || strings.TrimSpace(line) == "" {
			continue
		}
		// Interface names cannot contain ':', and old kernels print no
		// space between the colon and the first counter.
		name, rest, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, lineError(path, n, "want \"<interface>: <counters>\"")
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			return nil, lineError(path, n, "want at least 9 counters after %q, got %d", name, len(f))
		}
		rx, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return nil, fieldError(path, n, "rx_bytes", err)
		}
		tx, err := strconv.ParseUint(f[8], 10, 64)
		if err != nil {
			return nil, fieldError(path, n, "tx_bytes", err)
		}
		sum, carry := bits.Add64(rx, tx, 0)
		if carry != 0 {
			return nil, fieldError(path, n, "tx_bytes", errSumRange)
		}
		out = append(out, InterfaceCounters{Name: name, Bytes: sum})
	}
	if n < 2 {
		return nil, fmt.Errorf("%s: want two header lines, got %d lines", path, n)
	}
	return out, nil
}

// parseDiskstats reads the busy time of every device of /proc/diskstats,
// whose lines are "<major> <minor> <name>" followed by at least 11
// counters; the 10th counter, the 13th field, is io_ticks. A node without
// block devices has an empty file, which is not an error.
func parseDiskstats(path, data string) ([]DiskCounter, error) {
	var out []DiskCounter
	n := 0
	for line := range strings.Lines(data) {
		n++
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 13 {
			return nil, lineError(path, n, "want at least 13 fields, got %d", len(f))
		}
		busy, err := strconv.ParseUint(f[12], 10, 64)
		if err != nil {
			return nil, fieldError(path, n, "io_ticks", err)
		}
		out = append(out, DiskCounter{Name: f[2], BusyMillis: busy})
	}
	return out, nil
}
