// Package scenarios holds the shipped scenarios of `aisched sim run`
// (docs/scenarios.md). Those that need no trace are embedded in the
// binary for the console's simulations page; the trace scenarios need the
// trace's files and run from the command line.
package scenarios

import "embed"

// Files are the shipped scenarios that need no trace.
//
//go:embed *.yaml
var Files embed.FS
