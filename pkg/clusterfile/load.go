package clusterfile

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"

	"github.com/aisched/aisched/pkg/util/yamlfile"
)

//go:embed default.yaml
var defaultCluster []byte

// DefaultName is the name under which errors in the built-in cluster are reported.
const DefaultName = "<built-in default cluster>"

// Default returns the built-in heterogeneous cluster used when no file is given.
func Default() *Cluster {
	c, err := Parse(DefaultName, defaultCluster)
	if err != nil {
		// The file is embedded and covered by a test; failing here is a build defect.
		panic(err)
	}
	return c
}

// DefaultYAML returns the text of the built-in cluster, a starting point for a file of one's own.
func DefaultYAML() []byte { return bytes.Clone(defaultCluster) }

// Load reads, decodes, defaults and validates a cluster file.
func Load(path string) (*Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster file: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes, defaults and validates the cluster file content; name is
// used in error messages.
func Parse(name string, data []byte) (*Cluster, error) {
	var c Cluster
	root, err := yamlfile.Decode(name, data, "a Cluster with nodePools", &c)
	if err != nil {
		return nil, err
	}
	c.setDefaults()
	if errs := c.Validate(); len(errs) > 0 {
		return nil, yamlfile.FieldError(name, root, errs)
	}
	return &c, nil
}

func (c *Cluster) setDefaults() { SetNodePoolDefaults(c.NodePools) }

// SetNodePoolDefaults fills the fields the pools left out.
func SetNodePoolDefaults(pools []NodePool) {
	for i := range pools {
		p := &pools[i]
		if p.MaxPods == 0 {
			p.MaxPods = DefaultMaxPods
		}
		if !p.EphemeralStorage.IsSet() {
			p.EphemeralStorage = Quantity{Quantity: DefaultEphemeralStorage.DeepCopy(), set: true}
		}
	}
}
