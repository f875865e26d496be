package deliver

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"
)

// Environment the hook sets in every container it delivers cards to.
const (
	// VisibleDevicesEnv is what NVIDIA's container toolkit reads to give a
	// container its cards: the UUIDs, or "void" when CDI names them.
	VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"
	// UUIDsEnv records the delivered cards, so that the hook rebuilds its
	// holdings from the runtime's containers after a restart.
	UUIDsEnv = "AISCHED_GPU_UUIDS"
	// ShareEnv records a delivered share, "milli=500,memMiB=3000"; absent
	// for whole cards.
	ShareEnv = "AISCHED_GPU_SHARE"
)

// Isolation is the layer that enforces a share of a card inside the
// container.
type Isolation string

const (
	// IsolationNone enforces nothing: a shared pod gets its card and the
	// environment of its share, and may use the whole card.
	IsolationNone Isolation = "none"
	// IsolationHAMiCore is HAMi-core's in-container limiter (libvgpu.so),
	// preloaded into the container: it caps the memory the CUDA driver
	// hands out on each of the container's cards (CUDA_DEVICE_MEMORY_LIMIT_<i>,
	// i its position among them) and throttles kernel launches to a share
	// of the SMs (CUDA_DEVICE_SM_LIMIT, every card alike).
	IsolationHAMiCore Isolation = "hami-core"
	// IsolationMPS is an NVIDIA MPS control daemon on the node: the
	// container connects through its pipe directory, with an active thread
	// percentage and a pinned device memory limit for each of its cards.
	IsolationMPS Isolation = "mps"
)

// DeviceNaming is how the container's cards are named to the runtime.
type DeviceNaming string

const (
	// NamingEnv sets NVIDIA_VISIBLE_DEVICES to the UUIDs, for NVIDIA's
	// container toolkit in its legacy (environment) mode; it replaces what
	// NVIDIA's device plugin set with its envvar strategy.
	NamingEnv DeviceNaming = "env"
	// NamingCDI adds the CDI devices nvidia.com/gpu=<UUID> (the names
	// nvidia-ctk generates) and sets NVIDIA_VISIBLE_DEVICES=void, so that
	// a device plugin's own choice in the environment gives nothing.
	NamingCDI DeviceNaming = "cdi"
)

// Layer turns a Delivery into a container's adjustment on one node.
type Layer struct {
	Isolation Isolation
	Naming    DeviceNaming
	// HAMiCoreLibrary is the host path of HAMi-core's libvgpu.so, mounted
	// read-only at the same path and preloaded (IsolationHAMiCore).
	HAMiCoreLibrary string
	// MPSPipeDirectory is the host directory of the MPS control daemon's
	// pipes, mounted at the same path (IsolationMPS).
	MPSPipeDirectory string
}

// Validate checks the layer's fields, naming the one at fault.
func (l Layer) Validate() error {
	switch l.Naming {
	case NamingEnv, NamingCDI:
	default:
		return fmt.Errorf("device naming %q: want %q or %q", l.Naming, NamingEnv, NamingCDI)
	}
	switch l.Isolation {
	case IsolationNone:
	case IsolationHAMiCore:
		if !filepath.IsAbs(l.HAMiCoreLibrary) {
			return fmt.Errorf("HAMi-core library %q: want the absolute host path of libvgpu.so", l.HAMiCoreLibrary)
		}
	case IsolationMPS:
		if !filepath.IsAbs(l.MPSPipeDirectory) {
			return fmt.Errorf("MPS pipe directory %q: want the absolute host path", l.MPSPipeDirectory)
		}
	default:
		return fmt.Errorf("isolation %q: want %q, %q or %q", l.Isolation, IsolationNone, IsolationHAMiCore, IsolationMPS)
	}
	return nil
}

// Adjust writes d into adj. It returns a warning for a share that nothing
// on the node enforces.
func (l Layer) Adjust(d Delivery, adj *api.ContainerAdjustment) (warning string) {
	uuids := strings.Join(d.UUIDs, ",")
	switch l.Naming {
	case NamingCDI:
		for _, u := range d.UUIDs {
			adj.AddCDIDevice(&api.CDIDevice{Name: "nvidia.com/gpu=" + u})
		}
		adj.AddEnv(VisibleDevicesEnv, "void")
	default:
		adj.AddEnv(VisibleDevicesEnv, uuids)
	}
	adj.AddEnv(UUIDsEnv, uuids)
	if d.Share == nil {
		return ""
	}
	sh := *d.Share
	adj.AddEnv(ShareEnv, formatShare(sh))
	percent := strconv.FormatInt((sh.Milli+9)/10, 10)
	mib := strconv.FormatInt(sh.MemMiB, 10)
	switch l.Isolation {
	case IsolationHAMiCore:
		adj.AddMount(&api.Mount{Source: l.HAMiCoreLibrary, Destination: l.HAMiCoreLibrary, Type: "bind", Options: []string{"rbind", "ro"}})
		adj.AddEnv("LD_PRELOAD", l.HAMiCoreLibrary)
		if sh.MemMiB > 0 {
			// The container's cards are CUDA devices 0..n-1 in the order
			// of NVIDIA_VISIBLE_DEVICES.
			for i := range d.UUIDs {
				adj.AddEnv("CUDA_DEVICE_MEMORY_LIMIT_"+strconv.Itoa(i), mib+"m")
			}
		}
		if sh.Milli > 0 {
			adj.AddEnv("CUDA_DEVICE_SM_LIMIT", percent)
		}
	case IsolationMPS:
		adj.AddMount(&api.Mount{Source: l.MPSPipeDirectory, Destination: l.MPSPipeDirectory, Type: "bind", Options: []string{"rbind", "rw"}})
		adj.AddEnv("CUDA_MPS_PIPE_DIRECTORY", l.MPSPipeDirectory)
		if sh.Milli > 0 {
			adj.AddEnv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", percent)
		}
		if sh.MemMiB > 0 {
			limits := make([]string, len(d.UUIDs))
			for i := range d.UUIDs {
				limits[i] = strconv.Itoa(i) + "=" + mib + "M"
			}
			adj.AddEnv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", strings.Join(limits, ","))
		}
	default:
		return fmt.Sprintf("no GPU isolation layer on this node: the share of card %s (%s of each) is not enforced, the container may use the whole card", uuids, formatShare(sh))
	}
	return ""
}

func formatShare(sh Share) string {
	return "milli=" + strconv.FormatInt(sh.Milli, 10) + ",memMiB=" + strconv.FormatInt(sh.MemMiB, 10)
}

// parseShare reads ShareEnv's value.
func parseShare(v string) (Share, error) {
	var sh Share
	for _, part := range strings.Split(v, ",") {
		key, val, _ := strings.Cut(part, "=")
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n < 0 {
			return Share{}, fmt.Errorf("%s=%q: %q is not a count", ShareEnv, v, val)
		}
		switch key {
		case "milli":
			sh.Milli = n
		case "memMiB":
			sh.MemMiB = n
		default:
			return Share{}, fmt.Errorf("%s=%q: unknown key %q", ShareEnv, v, key)
		}
	}
	return sh, nil
}
