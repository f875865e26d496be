// Package trace reads the openb node and pod lists of the Alibaba GPU
// cluster trace v2023 (alibaba/clusterdata, cluster-trace-gpu-v2023), the
// trace that "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
// Fragmentation Gradient Descent" (Weng et al., USENIX ATC '23) evaluates FGD
// on, and builds the arrival sequence of that paper's evaluation protocol.
// `aisched sim trace` replays the sequence on the real scheduler and compares
// the unallocated GPU with the paper.
//
// # Files
//
// ReadNodes reads a node list (sn,cpu_milli,memory_mib,gpu,model). ReadPods
// reads a pod list in either of the two forms the trace ships:
//
//	name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
//	name,cpu_milli,memory_mib,num_gpu,gpu_milli   (openb_pod_list_multigpu20.csv)
//
// The header row is required and decides the form; columns are found by
// name, so their order is free. A UTF-8 byte order mark and CRLF line ends
// are accepted. Reading stops at the first bad row and returns no rows: a
// replay on a partly read trace would silently differ from the paper, so a
// corrupt line must be fixed, not skipped. Errors name the file, the data row
// (1-based, the header not counted: row N is line N+1 of the file unless a
// quoted field spans lines) and the column:
//
//	pods.csv: row 17: column gpu_milli: "abc" is not a whole number
//
// # GPU requests
//
// num_gpu is the number of cards (0..64). For num_gpu == 1, gpu_milli is the
// share of the card in thousandths (1..1000; below 1000 the pod shares the
// card). Every multi-GPU row of the trace has gpu_milli == 1000, that is, it
// holds the share of each card and multi-GPU pods take whole cards; ReadPods
// requires it. Pod.TotalGPUMilli is therefore num_gpu*1000 for multi-GPU pods
// and gpu_milli for one card. gpu_spec lists the acceptable card models
// separated by "|"; empty accepts any (every row of the published openb files
// has it empty).
//
// # The FGD protocol
//
// The cluster is openb_node_list_gpu_node.csv and pods never leave. Workload
// shuffles the pod list with a seed (the paper uses 42..51) and inflates it
// with random copies until the requested GPU reaches 1.3 times the cluster's
// capacity (CapacityMilli). The runner schedules the pods one at a time, a
// pod that does not fit is not retried, and reads the unallocated GPU where
// the arrived GPU request reaches a percentage of the capacity
// (metrics.UnallocatedCurve).
//
// # Card models
//
// NodeModel turns the model names of the trace (node column model, pod column
// gpu_spec) into the product names of GPU Feature Discovery that pkg/gpu and
// the simulated node pools use, so that a pod's gpu_spec and a node's model
// compare equal after the conversion. Alibaba does not disclose G1, G2 and G3;
// they stay as they are. The form factors (SXM2, PCIe) are those of the
// Alibaba Cloud instance families with these cards (gn5, gn6v, gn6e, gn6i,
// gn7i); the trace names only the chip and, for the V100, its memory.
//
//	trace     node model
//	T4        Tesla-T4
//	P100      Tesla-P100-PCIE-16GB
//	V100M16   Tesla-V100-SXM2-16GB
//	V100M32   Tesla-V100-SXM2-32GB
//	A10       NVIDIA-A10
//	G1 G2 G3  unchanged (undisclosed)
//	other     unchanged
package trace
