package clusterfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
)

const header = "apiVersion: aisched.io/v1alpha1\nkind: Cluster\n"

func TestDefault(t *testing.T) {
	c := Default()
	var cpuOnly, gpuModels int
	models := map[string]bool{}
	for _, p := range c.NodePools {
		if p.GPUs == nil {
			cpuOnly += p.Count
			continue
		}
		if !models[p.GPUs.Model] {
			gpuModels++
		}
		models[p.GPUs.Model] = true
	}
	// The issue asks for a heterogeneous default: CPU-only nodes and two card types.
	if cpuOnly == 0 || gpuModels != 2 {
		t.Errorf("default cluster has %d CPU-only nodes and %d GPU models, want some and 2", cpuOnly, gpuModels)
	}
}

func TestParse(t *testing.T) {
	c, err := Parse("c.yaml", []byte(header+`
nodePools:
  - name: gpu
    count: 2
    cpu: 16
    memory: 64Gi
    labels:
      zone: a
    taints:
      - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
    gpus: {count: 4, model: Tesla-V100, memoryMiB: 32768, computeCapability: "7.0"}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.NodePools[0]
	want := NodePool{
		Name:             "gpu",
		Count:            2,
		CPU:              Quantity{Quantity: resource.MustParse("16"), set: true},
		Memory:           Quantity{Quantity: resource.MustParse("64Gi"), set: true},
		EphemeralStorage: Quantity{Quantity: DefaultEphemeralStorage, set: true},
		MaxPods:          DefaultMaxPods,
		Labels:           map[string]string{"zone": "a"},
		Taints:           []Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}},
		GPUs:             &GPUs{Count: 4, Model: "Tesla-V100", MemoryMiB: 32768, ComputeCapability: "7.0"},
	}
	if diff := cmp.Diff(want, p, cmp.Comparer(func(a, b Quantity) bool { return a.set == b.set && a.Cmp(b.Quantity) == 0 })); diff != "" {
		t.Errorf("pool (-want,+got):\n%s", diff)
	}
	if got := p.NodeName(1); got != "gpu-1" {
		t.Errorf("NodeName(1) = %q, want gpu-1", got)
	}
}

func TestParseErrors(t *testing.T) {
	pool := "nodePools:\n  - name: p\n    count: 1\n    cpu: 4\n    memory: 8Gi\n"
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"empty file", "", "c.yaml: file is empty"},
		{"syntax", header + "nodePools: [\n", "c.yaml:3: invalid YAML"},
		{"wrong kind", "apiVersion: aisched.io/v1alpha1\nkind: Node\n" + pool, `c.yaml:2: kind: Unsupported value: "Node"`},
		{"no pools", header, "c.yaml:1: nodePools: Required value"},
		{"unknown field", header + pool + "    cpus: 4\n", `c.yaml:8: nodePools[0].cpus: unknown field "cpus"`},
		{"count not a number", header + "nodePools:\n  - name: p\n    count: four\n    cpu: 4\n    memory: 8Gi\n", `c.yaml:5: nodePools[0].count: invalid value "four": want an integer`},
		{"bad quantity", header + "nodePools:\n  - name: p\n    count: 1\n    cpu: lots\n    memory: 8Gi\n", `c.yaml:6: nodePools[0].cpu: invalid quantity "lots"`},
		{"missing memory", header + "nodePools:\n  - name: p\n    count: 1\n    cpu: 4\n", "c.yaml:4: nodePools[0].memory: Required value"},
		{"negative count", header + "nodePools:\n  - name: p\n    count: -1\n    cpu: 4\n    memory: 8Gi\n", "c.yaml:5: nodePools[0].count: Invalid value: -1"},
		{"zero cpu", header + "nodePools:\n  - name: p\n    count: 1\n    cpu: 0\n    memory: 8Gi\n", "c.yaml:6: nodePools[0].cpu: Invalid value: \"0\": must be greater than 0"},
		{"bad name", header + "nodePools:\n  - name: GPU_Pool\n    count: 1\n    cpu: 4\n    memory: 8Gi\n", "c.yaml:4: nodePools[0].name: Invalid value: \"GPU_Pool\""},
		{"duplicate pool", header + pool + "  - name: p\n    count: 1\n    cpu: 4\n    memory: 8Gi\n", "c.yaml:8: nodePools[1].name: Duplicate value"},
		{"too many pods", header + pool + "    maxPods: 5000\n", "c.yaml:8: nodePools[0].maxPods: Invalid value: 5000"},
		{"negative link speed", header + pool + "    performance:\n      networkMbps: -1\n", "c.yaml:9: nodePools[0].performance.networkMbps: Invalid value: -1"},
		{"base load over 100", header + pool + "    baseLoad:\n      disk: 101\n", "c.yaml:9: nodePools[0].baseLoad.disk: Invalid value: 101"},
		{"bad label", header + pool + "    labels:\n      bad key!: x\n", "c.yaml:9: nodePools[0].labels[bad key!]: Invalid value"},
		{"bad taint effect", header + pool + "    taints:\n      - key: a\n        effect: Never\n", `c.yaml:10: nodePools[0].taints[0].effect: Unsupported value: "Never"`},
		{"gpu memory zero", header + pool + "    gpus:\n      count: 2\n      model: T4\n      memoryMiB: 0\n", "c.yaml:11: nodePools[0].gpus.memoryMiB: Invalid value: 0: must be between 1 and 1048576"},
		{"cpu beyond any node", header + "nodePools:\n  - name: p\n    count: 1\n    cpu: 1e100\n    memory: 8Gi\n", `c.yaml:6: nodePools[0].cpu: Invalid value: "10e99": must be at most 100k`},
		{"network beyond any node", header + pool + "    performance:\n      networkMbps: 100000000000\n", "nodePools[0].performance.networkMbps: Invalid value: 100000000000: must be between 0 (the default) and 10000000"},
		{"gpu without model", header + pool + "    gpus:\n      count: 2\n      memoryMiB: 100\n", "c.yaml:9: nodePools[0].gpus.model: Required value"},
		{"bad compute capability", header + pool + "    gpus: {count: 1, model: T4, memoryMiB: 1, computeCapability: eight}\n", "nodePools[0].gpus.computeCapability: Invalid value: \"eight\""},
		{"gpus as list", header + pool + "    gpus: [1, 2]\n", "c.yaml:8: nodePools[0].gpus: want a mapping, found a YAML seq"},
		{"two documents", header + pool + "---\n" + header, "c.yaml:8: want one YAML document"},
		{"too many nodes", header + "nodePools:\n  - name: p\n    count: 9000\n    cpu: 4\n    memory: 8Gi\n", "nodePools[0].count: Invalid value: 9000"},
		{"topology level without nodes", header + pool + "    topology:\n      - {label: example.com/rack}\n", "nodePools[0].topology[0].nodes: Invalid value: 0: must be between 1 and 8192"},
		{"topology level not a label key", header + pool + "    topology:\n      - {label: rack/, nodes: 2}\n", `nodePools[0].topology[0].label: Invalid value: "rack/"`},
		{"topology level also a label", header + pool + "    labels: {example.com/rack: r1}\n    topology:\n      - {label: example.com/rack, nodes: 2}\n", "nodePools[0].topology[0].label: Duplicate value"},
		{"topology values not label values", header + pool + "    topology:\n      - {label: example.com/rack, nodes: 2, prefix: \"rack/\"}\n", `nodePools[0].topology[0].prefix: Invalid value: "rack/": the values it makes, such as "rack/0"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.in))
			if err == nil {
				t.Fatalf("Parse succeeded, want error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tc.wantErr)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "c.yaml") {
					t.Errorf("error line %q does not name the file", line)
				}
			}
		})
	}
}

// Every error of a file is reported, each at its line.
func TestParseAllErrors(t *testing.T) {
	_, err := Parse("c.yaml", []byte(header+"nodePools:\n  - name: p\n    count: 1\n    cpu: 0\n    memory: 0\n"))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	for _, want := range []string{`c.yaml:6: nodePools[0].cpu: Invalid value: "0"`, `c.yaml:7: nodePools[0].memory: Invalid value: "0"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not report %q", err, want)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("Load of a missing file: err = %v, want one naming the file", err)
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, DefaultYAML(), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Default().NodeCount(), c.NodeCount()); diff != "" {
		t.Errorf("node count (-want,+got):\n%s", diff)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(DefaultYAML())
	f.Add([]byte(header + "nodePools:\n  - name: p\n    count: 1\n    cpu: 4\n    memory: 8Gi\n"))
	f.Add([]byte("nodePools: [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error: %q", err)
			}
			return
		}
		if errs := c.Validate(); len(errs) > 0 {
			t.Errorf("Parse accepted a cluster that does not validate: %v", errs)
		}
	})
}

// A pool's topology labels each node with its domain at every level.
func TestTopologyLabels(t *testing.T) {
	c, err := Parse("c.yaml", []byte(header+`nodePools:
  - name: gb200
    count: 40
    cpu: 72
    memory: 480Gi
    topology:
      - {label: example.com/block, nodes: 36}
      - {label: example.com/rack, nodes: 18}
      - {label: nvidia.com/gpu.clique, nodes: 18, prefix: "cluster-a.clique-"}
`))
	if err != nil {
		t.Fatal(err)
	}
	pool := &c.NodePools[0]
	for i, want := range map[int]map[string]string{
		0:  {"example.com/block": "gb200-block-0", "example.com/rack": "gb200-rack-0", "nvidia.com/gpu.clique": "cluster-a.clique-0"},
		20: {"example.com/block": "gb200-block-0", "example.com/rack": "gb200-rack-1", "nvidia.com/gpu.clique": "cluster-a.clique-1"},
		39: {"example.com/block": "gb200-block-1", "example.com/rack": "gb200-rack-2", "nvidia.com/gpu.clique": "cluster-a.clique-2"},
	} {
		if diff := cmp.Diff(want, pool.TopologyLabels(i)); diff != "" {
			t.Errorf("node %d (-want,+got):\n%s", i, diff)
		}
	}
}

func TestDescribe(t *testing.T) {
	c := &Cluster{NodePools: []NodePool{
		{Name: "cpu", Count: 4},
		{Name: "a100", Count: 2, GPUs: &GPUs{Count: 8, Model: "NVIDIA-A100-SXM4-40GB"}},
		{Name: "none", Count: 0, GPUs: &GPUs{Count: 8, Model: "H100"}},
		{Name: "t4", Count: 2, GPUs: &GPUs{Count: 4, Model: "Tesla-T4"}},
		{Name: "zero-cards", Count: 1, GPUs: &GPUs{}},
	}}
	want := "9 nodes: 5 CPU-only, 2 with 8 nvidia.com/gpu cards per node (NVIDIA-A100-SXM4-40GB), 2 with 4 nvidia.com/gpu cards per node (Tesla-T4)"
	if got := c.Describe(); got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
	gpuOnly := &Cluster{NodePools: []NodePool{{Name: "t4", Count: 1, GPUs: &GPUs{Count: 1, Model: "Tesla-T4"}}}}
	if got, want := gpuOnly.Describe(), "1 nodes: 1 with 1 nvidia.com/gpu cards per node (Tesla-T4)"; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
}
