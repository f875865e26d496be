package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// pccCluster is the heterogeneous trio of the PCC balance experiment:
// nodes of different CPU, memory and GPU shapes.
const pccCluster = `apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: a, count: 1, cpu: "16", memory: 64Gi, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}}
  - {name: b, count: 1, cpu: "32", memory: 64Gi, gpus: {count: 2, model: Tesla-T4, memoryMiB: 15360}}
  - {name: c, count: 1, cpu: "16", memory: 128Gi, gpus: {count: 2, model: Tesla-T4, memoryMiB: 15360}}
`

// pccBackground is the optional starting load, one pod pinned to each
// node, each of a different shape (CPU-heavy, memory-heavy, GPU-heavy), the
// way a shared cluster looks when a new workload arrives. On empty nodes
// every PCC score ties (rho = 0) and the upstream tie-break is random, so
// results there vary from run to run.
var pccBackground = []struct {
	node     string
	cpu, mem string
	gpus     int64
}{
	{"a-0", "4", "8Gi", 0},
	{"b-0", "4", "40Gi", 0},
	{"c-0", "2", "8Gi", 1},
}

// pccWorkloads are the four runs of 6 identical pods: cpu, memory, GPUs.
var pccWorkloads = []struct {
	name          string
	cpu, mem, gpu string
}{
	{"gpu-heavy", "1", "2Gi", "1"},
	{"memory-heavy", "1", "16Gi", "0"},
	{"cpu-heavy", "6", "2Gi", "0"},
	{"balanced", "3", "12Gi", "1"},
}

// TestPCCExperiment runs the PCC balance experiment on the embedded cluster: on top of
// the background load, each workload with default scoring and with
// PCCBalance in both modes. It reports the mean over nodes of the variance of
// each node's (cpu%, mem%, gpu%), background included, and checks that the
// default mode of PCCBalance balances better than upstream scoring on most
// workloads. The numbers are in the test log and in
// pkg/scheduler/plugins/pccbalance/README.md.
func TestPCCExperiment(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "pkg", "scheduler", "plugins", "pccbalance", "example-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := scheduler.DecodeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := clusterfile.Parse("pcc", []byte(pccCluster))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Options{Cluster: cluster, SchedulerConfig: cfg})
	profiles := []string{"default-scheduler", "pcc-abs", "pcc-signed"}
	results := map[string]map[string]float64{}
	for _, w := range pccWorkloads {
		results[w.name] = map[string]float64{}
		for _, profile := range profiles {
			results[w.name][profile] = runPCC(t, c, profile, w.cpu, w.mem, w.gpu)
		}
		t.Logf("%-13s mean node variance: default %6.1f, abs %6.1f, signed %6.1f",
			w.name, results[w.name]["default-scheduler"], results[w.name]["pcc-abs"], results[w.name]["pcc-signed"])
	}
	better := 0
	for _, w := range pccWorkloads {
		if results[w.name]["pcc-signed"] < results[w.name]["default-scheduler"] {
			better++
		}
	}
	if better < 3 {
		t.Errorf("PCCBalance (signed) balanced better than default scoring on %d of 4 workloads, want at least 3", better)
	}
}

// runPCC places the background load and 6 pods with the profile,
// measures, and removes them.
func runPCC(t *testing.T, c *local.Cluster, profile, cpu, mem, gpus string) float64 {
	t.Helper()
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	for _, b := range pccBackground {
		p := utiltesting.MakePod("background-"+b.node, ns).Node(b.node).
			Req(corev1.ResourceCPU, b.cpu).Req(corev1.ResourceMemory, b.mem)
		if b.gpus > 0 {
			p.GPU(b.gpus)
		}
		createPods(t, c, p.Obj())
	}
	for i := range 6 {
		p := utiltesting.MakePod(fmt.Sprintf("p%d", i), ns).SchedulerName(profile).
			Req(corev1.ResourceCPU, cpu).Req(corev1.ResourceMemory, mem)
		if gpus != "0" {
			p.GPU(1)
		}
		createPods(t, c, p.Obj())
	}
	running, unschedulable := settle(t, c, ns, 6+len(pccBackground))
	if len(unschedulable) > 0 {
		t.Fatalf("%s: %d pods unschedulable", profile, len(unschedulable))
	}
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, n := range nodes.Items {
		var used [3]float64
		for _, p := range running {
			if p.Spec.NodeName != n.Name {
				continue
			}
			r := p.Spec.Containers[0].Resources.Requests
			used[0] += float64(r.Cpu().MilliValue())
			used[1] += float64(r.Memory().Value())
			q := r[gpu.ResourceName]
			used[2] += float64(q.Value())
		}
		alloc := n.Status.Allocatable
		g := alloc[gpu.ResourceName]
		pct := [3]float64{
			100 * used[0] / float64(alloc.Cpu().MilliValue()),
			100 * used[1] / float64(alloc.Memory().Value()),
			100 * used[2] / float64(g.Value()),
		}
		mean := (pct[0] + pct[1] + pct[2]) / 3
		var v float64
		for _, x := range pct {
			v += (x - mean) * (x - mean)
		}
		sum += v / 3
	}
	deletePods(t, c, ns)
	return sum / float64(len(nodes.Items))
}
