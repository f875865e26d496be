// Package collect measures a Linux node for the node agent: its utilisation
// (CPU, memory, network, disk, each in [0,1]) and its static performance
// (logical CPUs, maximum frequency, memory, link speed, disk throughput),
// which the scheduler turns into the node's load L and performance S.
//
// Everything comes from /proc and /sys under a configurable root, so the
// agent stays a static binary without cgo or external commands, and tests
// run against fixture trees under testdata/.
//
// Utilisation is a rate, so it takes two readings: the agent keeps the
// previous Snapshot and calls Utilize(prev, cur) on each tick. A source that
// cannot be read leaves its part of a reading nil and the corresponding
// utilisation unknown (nil) rather than zero, so that the scheduler never
// mistakes a broken collector for an idle node.
//
// Collector has no mutable state; its methods are safe for concurrent use.
package collect
