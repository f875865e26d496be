// Package nvidiasmi reads a node's NVIDIA GPUs, their utilisation and
// memory use from `nvidia-smi --query-gpu`, for the node agent to publish as
// the node's GPUInventory. It runs the nvidia-smi that the NVIDIA container
// toolkit mounts into the agent's container instead of linking NVML, so the
// agent stays a static binary without cgo that also runs on nodes without
// GPUs.
package nvidiasmi

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Query is the --query-gpu field list, in the order Parse expects.
const Query = "index,uuid,name,memory.total,memory.used,utilization.gpu,clocks.max.sm,compute_cap"

// legacyQuery is Query without compute_cap, which drivers before 510 reject.
const legacyQuery = "index,uuid,name,memory.total,memory.used,utilization.gpu,clocks.max.sm"

// Card is one GPU as nvidia-smi reports it.
type Card struct {
	// Index is nvidia-smi's index of the card, from 0.
	Index int32
	// UUID is the card's UUID, GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
	UUID string
	// Name is the raw product name, e.g. "NVIDIA A100-SXM4-80GB".
	Name string
	// MemoryTotalMiB is the card's memory, always positive.
	MemoryTotalMiB int64
	// MemoryUsedMiB is the memory in use; 0 when not reported.
	MemoryUsedMiB int64
	// UtilizationPercent is the share of the last sample period in which a
	// kernel ran, 0 to 100; nil when not reported ("[N/A]" or
	// "[Not Supported]", which some cards print).
	UtilizationPercent *int32
	// MaxClockMHz is the maximum SM clock; 0 when not reported.
	MaxClockMHz int64
	// ComputeCapability is major.minor, e.g. "8.0"; "" when not reported
	// (drivers before 510 lack compute_cap).
	ComputeCapability string
}

// Parse parses the output of `nvidia-smi --query-gpu=Query
// --format=csv,noheader,nounits`, one card a line, with the 8 fields of
// Query or the first 7 of them (older drivers, see Runner.Cards). Blank
// lines are skipped. Each bad line gives an error naming its number and the
// field, e.g. `line 2: memory.total "abc": not a number`; the cards of the
// good lines are returned with the joined errors. Output without any line
// is an error too: nvidia-smi prints one line per card, and a node without
// cards makes it fail, not print nothing.
func Parse(out []byte) ([]Card, error) {
	var (
		cards []Card
		errs  []error
		// lineOf maps an index to the line that had it. The inventory is a
		// map keyed by index; a second card with the same index means the
		// output is not what we asked for.
		lineOf = map[int32]int{}
	)
	for i, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		n := i + 1
		c, err := parseLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		if first, ok := lineOf[c.Index]; ok {
			errs = append(errs, fmt.Errorf("line %d: index %d: duplicate of line %d", n, c.Index, first))
			continue
		}
		lineOf[c.Index] = n
		cards = append(cards, c)
	}
	if len(cards) == 0 && len(errs) == 0 {
		return nil, errors.New("nvidia-smi printed no cards")
	}
	return cards, errors.Join(errs...)
}

// parseLine parses one line of Parse's input.
func parseLine(line string) (Card, error) {
	f := strings.Split(line, ",")
	if len(f) != 7 && len(f) != 8 {
		return Card{}, fmt.Errorf("%d fields, want 8 (%s) or 7 (without compute_cap)", len(f), Query)
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	var c Card
	index, err := number("index", f[0], 32)
	if err != nil {
		return Card{}, err
	}
	c.Index = int32(index)
	c.UUID = f[1]
	if c.Name = f[2]; c.Name == "" {
		return Card{}, errors.New("name: empty")
	}
	if c.MemoryTotalMiB, err = number("memory.total", f[3], 64); err != nil {
		return Card{}, err
	}
	if c.MemoryTotalMiB == 0 {
		// The inventory requires memory; a card without is not usable.
		return Card{}, fmt.Errorf("memory.total %q: zero", f[3])
	}
	if c.MemoryUsedMiB, _, err = optionalNumber("memory.used", f[4], 64); err != nil {
		return Card{}, err
	}
	util, ok, err := optionalNumber("utilization.gpu", f[5], 32)
	switch {
	case err != nil:
		return Card{}, err
	case util > 100:
		return Card{}, fmt.Errorf("utilization.gpu %q: above 100", f[5])
	case ok:
		u := int32(util)
		c.UtilizationPercent = &u
	}
	if c.MaxClockMHz, _, err = optionalNumber("clocks.max.sm", f[6], 64); err != nil {
		return Card{}, err
	}
	if len(f) == 8 && !notReported(f[7]) {
		if !computeCapability.MatchString(f[7]) {
			return Card{}, fmt.Errorf("compute_cap %q: not major.minor", f[7])
		}
		c.ComputeCapability = f[7]
	}
	return c, nil
}

// computeCapability is the form that GPUInventory accepts.
var computeCapability = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

// number parses the non-negative integer field name of bitSize bits.
func number(name, s string, bitSize int) (int64, error) {
	v, err := strconv.ParseInt(s, 10, bitSize)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("%s %q: out of range", name, s)
	case err != nil && notReported(s):
		return 0, fmt.Errorf("%s %q: not reported", name, s)
	case err != nil:
		return 0, fmt.Errorf("%s %q: not a number", name, s)
	case v < 0:
		return 0, fmt.Errorf("%s %q: negative", name, s)
	}
	return v, nil
}

// optionalNumber is number for fields that cards may not report; ok is
// false when the card did not.
func optionalNumber(name, s string, bitSize int) (v int64, ok bool, err error) {
	if notReported(s) {
		return 0, false, nil
	}
	v, err = number(name, s, bitSize)
	return v, err == nil, err
}

// notReported reports whether s is one of nvidia-smi's bracketed stand-ins
// for a value: "[N/A]", "[Not Supported]", "[Unknown Error]",
// "[Insufficient Permissions]" and the like.
func notReported(s string) bool {
	return len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']'
}
