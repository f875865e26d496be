// Package scenarios holds the shipped scenarios of `aisched sim run`
// (docs/scenarios.md), embedded in the binary for the console's
// simulations page, which offers those that need no trace: the trace
// scenarios need the trace's files and run from the command line.
package scenarios

import "embed"

// Files are the shipped scenarios, *.yaml.
//
//go:embed *.yaml
var Files embed.FS
