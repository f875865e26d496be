// Package version reports the build of this aisched binary and the
// Kubernetes release it embeds.
package version

import (
	"fmt"
	"runtime"
)

// Kubernetes is the k8s.io/kubernetes release compiled in; a test keeps it
// equal to go.mod.
const Kubernetes = "v1.37.0"

// Release is the aisched release the Helm chart (charts/aisched) installs:
// it runs the image ghcr.io/aisched/aisched:<Release>, never a moving tag
// such as latest (tests check). A release changes it, Chart.yaml's version
// and appVersion together.
const Release = "v0.1.0"

// gitVersion is set at link time: -ldflags "-X github.com/aisched/aisched/pkg/version.gitVersion=v0.1.0".
var gitVersion = "v0.0.0-dev"

// Info describes one build.
type Info struct {
	// Version is the aisched release (or v0.0.0-dev for an untagged build).
	Version string `json:"version"`
	// Kubernetes is the k8s.io/kubernetes release compiled in.
	Kubernetes string `json:"kubernetes"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Get returns the version information of the running binary.
func Get() Info {
	return Info{
		Version:    gitVersion,
		Kubernetes: Kubernetes,
		GoVersion:  runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String formats the information on one line.
func (i Info) String() string {
	return fmt.Sprintf("aisched %s (kubernetes %s, %s, %s)", i.Version, i.Kubernetes, i.GoVersion, i.Platform)
}
