package nvidiasmi

import (
	"strconv"
	"strings"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
)

// Inventory returns the GPUInventory entry of the card, Healthy. Its model
// is the product name with dashes for spaces, as GPU Feature Discovery's
// gpu.product label and the simulated nodes write it ("NVIDIA A100-SXM4-80GB"
// becomes "NVIDIA-A100-SXM4-80GB"), so that a node reads the same whichever
// publishes it; the scheduler compares models after gpu.NormalizeModel.
// nvidia-smi reports neither CUDA cores nor memory bandwidth; they come from
// gpu.LookupModel (0 for models it does not know), as do compute capability
// and clock when nvidia-smi did not report them.
func (c Card) Inventory() aischedv1alpha1.GPU {
	spec, _ := gpu.LookupModel(c.Name)
	g := aischedv1alpha1.GPU{
		Index:               c.Index,
		UUID:                c.UUID,
		Model:               strings.Join(strings.Fields(c.Name), "-"),
		MemoryMiB:           c.MemoryTotalMiB,
		CUDACores:           spec.Cores,
		ComputeCapability:   c.ComputeCapability,
		MemoryBandwidthGBps: spec.BandwidthGBps,
		MaxClockMHz:         c.MaxClockMHz,
		Health:              aischedv1alpha1.GPUHealthy,
	}
	if g.ComputeCapability == "" && spec.ComputeCapability > 0 {
		g.ComputeCapability = strconv.FormatFloat(spec.ComputeCapability, 'f', 1, 64)
	}
	if g.MaxClockMHz == 0 {
		g.MaxClockMHz = spec.ClockMHz
	}
	return g
}
