// Package scenarios holds the shipped scenarios of `aisched sim run`
// (docs/scenarios.md). The seed scenarios are embedded in the binary for
// the console's simulations page; the trace scenarios need the trace's
// files and run from the command line.
package scenarios

import "embed"

// Seeds are the seed scenarios, seed*.yaml.
//
//go:embed seed*.yaml
var Seeds embed.FS
