package trace

import "strings"

// NodeModel returns the card model that simulated nodes carry for a model
// name of the trace (a node's model or an entry of a pod's gpu_spec), after
// the table in the package doc. The trace name is matched without regard to
// case and surrounding space; undisclosed (G1, G2, G3) and unknown names come
// back trimmed but otherwise unchanged, so that pods and nodes of the same
// trace still compare equal.
func NodeModel(traceModel string) string {
	m := strings.TrimSpace(traceModel)
	switch strings.ToUpper(m) {
	case "T4":
		return "Tesla-T4"
	case "P100":
		return "Tesla-P100-PCIE-16GB"
	case "V100M16":
		return "Tesla-V100-SXM2-16GB"
	case "V100M32":
		return "Tesla-V100-SXM2-32GB"
	case "A10":
		return "NVIDIA-A10"
	}
	return m
}
