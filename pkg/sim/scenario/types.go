// Package scenario is the scenario file of `aisched sim run`: a cluster, a
// workload that arrives over time, and the scheduling policies to compare
// on it. Load decodes, defaults and validates a file; every error names the
// file, the line and the field.
package scenario

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/aisched/aisched/pkg/clusterfile"
)

const (
	// APIVersion is the only apiVersion a scenario may declare.
	APIVersion = "aisched.io/v1alpha1"
	// Kind is the only kind a scenario may declare.
	Kind = "Scenario"
	// MaxReplicas bounds the count of one workload item.
	MaxReplicas = 100000
)

// DefaultSeeds are the seeds of a scenario that gives none.
var DefaultSeeds = []int64{42}

// MetricKeys are the metrics a scenario may ask for, by their JSON key.
var MetricKeys = []string{
	"pending_pods", "mean_node_variance", "balance_efficiency_h", "gpu_allocation_rate",
	"unallocated_gpu_pct", "unallocated_gpu_pct_curve", "partial_groups", "group_wait_seconds",
	"misplaced_gpu_pods", "pods_per_second",
	"makespan_seconds", "gpu_busy_pct", "gpu_work_pct", "topology_required_share", "topology_preferred_share", "topology_domains_spanned", "topology_slices_whole",
}

// TopologyMetricKeys are the metrics a scenario reports by default only
// when it has topologies.
var TopologyMetricKeys = []string{
	"makespan_seconds", "gpu_busy_pct", "gpu_work_pct", "topology_required_share", "topology_preferred_share", "topology_domains_spanned", "topology_slices_whole",
}

// Scenario is one experiment: the same workload on the same cluster under
// each policy.
type Scenario struct {
	// apiVersion is aisched.io/v1alpha1.
	APIVersion string `yaml:"apiVersion"`
	// kind is Scenario.
	Kind string `yaml:"kind"`
	// name identifies the scenario in reports; a DNS label.
	Name string `yaml:"name"`
	// description says what the scenario shows; +optional.
	Description string `yaml:"description"`
	// cluster is the simulated cluster, as in `aisched up`'s cluster file
	// (without apiVersion and kind).
	Cluster Cluster `yaml:"cluster"`
	// policies are compared, each on a fresh cluster; at least one.
	Policies []Policy `yaml:"policies"`
	// seeds each give one run per policy; +optional, default [42].
	Seeds []int64 `yaml:"seeds"`
	// metrics are reported, by JSON key; +optional, default all.
	Metrics []string `yaml:"metrics"`
	// namespaces are created before the workload, with their quotas;
	// "default" exists without being listed.
	Namespaces []Namespace `yaml:"namespaces"`
	// queues are team queues (aischedqueues), which the namespaces name;
	// each policy's admission says whether they are created or stand as
	// ResourceQuotas of their guarantees; +optional.
	Queues []Queue `yaml:"queues"`
	// topologies are created before the workload (aischedtopologies), for
	// workload items that ask for topology domains; +optional.
	Topologies []Topology `yaml:"topologies"`
	// topologySlowdown is how many times longer a gang runs when its
	// members are spread over several domains of the level it asks
	// (preferred, else required) or its slices are split: the slower
	// links between domains. The simulator runs a pod for its duration
	// wherever it lands unless this is given; +optional, default 1 (no
	// slowdown), 1 to MaxTopologySlowdown; needs topologies.
	TopologySlowdown float64 `yaml:"topologySlowdown"`
	// workload is what arrives; at least one item.
	Workload []Item `yaml:"workload"`
	// settle is how long no pod may be bound or end, after the last
	// arrival, before a run ends and is measured; +optional, default 3s.
	// Longer than the pods' durations lets what waits for them run.
	Settle Duration `yaml:"settle"`
	// trace replays an Alibaba GPU trace with the FGD paper's protocol
	// instead of a cluster and a workload (which must then be left out);
	// +optional.
	Trace *Trace `yaml:"trace"`
}

// Trace names the files of a trace replay (`aisched sim trace`). The
// trace is not shipped: the files are looked up in the directory given
// to `aisched sim run --trace-dir`.
type Trace struct {
	// nodes is the node list's file name, e.g. openb_node_list_gpu_node.csv.
	Nodes string `yaml:"nodes"`
	// pods is the pod list's file name, e.g. openb_pod_list_default.csv.
	Pods string `yaml:"pods"`
	// inflate is the GPU request of the sequence in multiples of the
	// cluster's capacity; +optional, default 1.3, 1 to 10.
	Inflate float64 `yaml:"inflate"`
	// typicalPodsFromTrace gives FGD the pod list's shapes; +optional.
	TypicalPodsFromTrace bool `yaml:"typicalPodsFromTrace"`
	// dra requests the GPUs through ResourceClaims of NVIDIA's DRA driver
	// (ReplayOptions.DRA); +optional.
	DRA bool `yaml:"dra"`
}

// DefaultInflate is a trace's inflate unless given (trace.CheckInflate
// bounds it).
const DefaultInflate = 1.3

// TraceMetricKeys are the metrics a trace replay reports.
var TraceMetricKeys = []string{
	"unallocated_gpu_pct", "unallocated_gpu_pct_curve", "gpu_allocation_rate",
	"pending_pods", "inexpressible_pods", "pods_per_second",
}

// MaxTopologySlowdown bounds a scenario's topologySlowdown.
const MaxTopologySlowdown = 10

// DefaultSettle is the settle of a scenario that gives none.
const DefaultSettle = 3 * time.Second

// Cluster is the node pools of a scenario.
type Cluster struct {
	// nodePools as in the cluster file.
	NodePools []clusterfile.NodePool `yaml:"nodePools"`
}

// Policy is one scheduler configuration to run the workload under.
type Policy struct {
	// name names the policy in reports; a DNS label. Without
	// schedulerConfig it is a profile of `aisched up`'s configuration
	// (default-scheduler, aisched, aisched-binpack).
	Name string `yaml:"name"`
	// schedulerConfig is a KubeSchedulerConfiguration file, relative to
	// the scenario file; +optional.
	SchedulerConfig string `yaml:"schedulerConfig"`
	// profile is the profile of schedulerConfig the pods use; +optional,
	// default name.
	Profile string `yaml:"profile"`
	// admission, in a scenario with queues: queues (the default) creates
	// them; resourceQuota gives each namespace of a queue a ResourceQuota
	// of the queue's guarantees instead; +optional.
	Admission string `yaml:"admission"`
	// ignoreTopology runs the pods without what they ask of topologies
	// (their topology.aisched.io/* annotations), as aisched placed them
	// before topologies: the baseline of a topology scenario. The
	// topology metrics still judge them by what they asked. +optional.
	IgnoreTopology bool `yaml:"ignoreTopology"`
}

// Topology is an aischedtopology of the scenario.
type Topology struct {
	// name is a DNS label.
	Name string `yaml:"name"`
	// levels are node labels, coarsest first (1 to 8).
	Levels []string `yaml:"levels"`
}

// Namespace is a namespace of the workload.
type Namespace struct {
	// name is a DNS label.
	Name string `yaml:"name"`
	// quota is the spec.hard of a ResourceQuota, e.g.
	// requests.nvidia.com/gpu: 8; +optional.
	Quota map[string]clusterfile.Quantity `yaml:"quota"`
	// queue is the leaf queue of the namespace's work: the namespace's
	// label scheduling.aisched.io/queue; +optional.
	Queue string `yaml:"queue"`
}

// Item is a set of identical pods that arrive one after the other.
type Item struct {
	// name prefixes the pods' names (name-0, name-1, ...); a DNS label,
	// unique in the scenario.
	Name string `yaml:"name"`
	// count is the number of pods; +optional, default 1.
	Count int `yaml:"count"`
	// namespace of the pods; +optional, default "default".
	Namespace string `yaml:"namespace"`
	// arrival is when the first pod arrives, after the start; +optional.
	Arrival Duration `yaml:"arrival"`
	// interval is the time between two pods' arrivals; +optional, 0: all at once.
	Interval Duration `yaml:"interval"`
	// duration is how long each pod runs once started; +optional, 0: until the end.
	Duration Duration `yaml:"duration"`
	// priority is the pods' priority (a PriorityClass of that value is made); +optional.
	Priority int32 `yaml:"priority"`
	// requests are the container's requests, e.g. cpu: 2, nvidia.com/gpu: 1.
	Requests map[string]clusterfile.Quantity `yaml:"requests"`
	// annotations are put on the pods, e.g. the GPU annotations
	// (gpu.aisched.io/memory, ...); +optional.
	Annotations map[string]string `yaml:"annotations"`
	// load is the expected load of each pod, in the syntax of the
	// scheduling.aisched.io/expected-load annotation; +optional.
	Load string `yaml:"load"`
	// group puts the pods in a pod group; +optional.
	Group *Group `yaml:"group"`
	// gangSize makes every gangSize consecutive pods a gang of their own,
	// named <name>-<n> with min-available gangSize, its members arriving
	// together: interval then spaces the gangs, not the pods. It divides
	// count; not with group. +optional.
	GangSize int `yaml:"gangSize"`
	// node binds the pods to this node of the cluster directly, past the
	// scheduler, as background load already running; +optional.
	Node string `yaml:"node"`
}

// Group is the pod group of an item; items naming the same group share it.
type Group struct {
	// name is the group's name; a DNS subdomain.
	Name string `yaml:"name"`
	// minAvailable is how many members must be placed together.
	MinAvailable int `yaml:"minAvailable"`
}

// Duration is a Go duration in YAML: 90s, 5m, 1h30m.
type Duration struct {
	time.Duration
}

// UnmarshalYAML parses the scalar; a bad value becomes a *yaml.TypeError so
// that it carries its line like every other decoding error.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: invalid duration %q: want a number with a unit such as 90s, 5m or 1h30m", n.Line, n.Value)}}
	}
	d.Duration = v
	return nil
}

// GangOf returns the group pod k of the item is in and its min-available
// (from group or gangSize); ok is false for a pod in no group.
func (it *Item) GangOf(k int) (name string, minAvailable int, ok bool) {
	switch {
	case it.GangSize > 0:
		return fmt.Sprintf("%s-%d", it.Name, k/it.GangSize), it.GangSize, true
	case it.Group != nil:
		return it.Group.Name, it.Group.MinAvailable, true
	}
	return "", 0, false
}

// ArrivalOf returns when pod k of the item arrives, after the start.
func (it *Item) ArrivalOf(k int) time.Duration {
	step := k
	if it.GangSize > 0 {
		step = k / it.GangSize
	}
	return it.Arrival.Duration + time.Duration(step)*it.Interval.Duration
}
