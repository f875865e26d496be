package scenario

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLoad(t *testing.T) {
	s, err := Load(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{42, 43}, s.Seeds); diff != "" {
		t.Errorf("seeds (-want,+got):\n%s", diff)
	}
	type policy struct{ name, config, profile string }
	var policies []policy
	for _, p := range s.Policies {
		policies = append(policies, policy{p.Name, p.SchedulerConfig, p.Profile})
	}
	wantPolicies := []policy{
		{"default-scheduler", "", "default-scheduler"},
		{"aisched", "", "aisched"},
		{"pcc-abs", filepath.Join("testdata", "pcc-abs.yaml"), "pcc"},
	}
	if diff := cmp.Diff(wantPolicies, policies, cmp.AllowUnexported(policy{})); diff != "" {
		t.Errorf("policies (-want,+got):\n%s", diff)
	}
	type item struct {
		name, namespace         string
		count                   int
		arrival, interval, runs time.Duration
		cpu, gpus               string
		group                   string
	}
	var items []item
	for _, it := range s.Workload {
		g := ""
		if it.Group != nil {
			g = it.Group.Name
		}
		gpus := it.Requests["nvidia.com/gpu"]
		cpu := it.Requests["cpu"]
		items = append(items, item{it.Name, it.Namespace, it.Count, it.Arrival.Duration, it.Interval.Duration, it.Duration.Duration, cpu.String(), gpus.String(), g})
	}
	wantItems := []item{
		{"infer", "default", 2, 0, time.Second, 90 * time.Second, "1", "1", ""},
		{"tf-ps", "team-a", 1, 5 * time.Second, 0, 0, "2", "0", "tf"},
		{"tf-worker", "team-a", 4, 5 * time.Second, 0, 0, "1", "2", "tf"},
	}
	if diff := cmp.Diff(wantItems, items, cmp.AllowUnexported(item{})); diff != "" {
		t.Errorf("workload (-want,+got):\n%s", diff)
	}
	if got := s.Cluster.NodePools[1].MaxPods; got != 110 {
		t.Errorf("node pool defaults not applied: maxPods %d, want 110", got)
	}
}

func TestDefaults(t *testing.T) {
	s, err := Parse("s.yaml", []byte(header+"policies: [{name: aisched}]\nworkload: [{name: w, requests: {cpu: 1}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DefaultSeeds, s.Seeds); diff != "" {
		t.Errorf("seeds (-want,+got):\n%s", diff)
	}
	// Without topologies, the topology metrics are not reported.
	want := slices.DeleteFunc(slices.Clone(MetricKeys), func(k string) bool { return slices.Contains(TopologyMetricKeys, k) })
	if diff := cmp.Diff(want, s.Metrics); diff != "" {
		t.Errorf("metrics (-want,+got):\n%s", diff)
	}
	withTopology, err := Parse("s.yaml", []byte(header+"policies: [{name: aisched}]\ntopologies: [{name: racks, levels: [example.com/rack]}]\nworkload: [{name: w, requests: {cpu: 1}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(MetricKeys, withTopology.Metrics); diff != "" {
		t.Errorf("metrics with topologies (-want,+got):\n%s", diff)
	}
	if w := s.Workload[0]; w.Count != 1 || w.Namespace != "default" {
		t.Errorf("item defaults: count %d, namespace %q; want 1, default", w.Count, w.Namespace)
	}
}

// traceHeader starts a trace scenario; trace is its trace section.
const (
	traceHeader = "apiVersion: aisched.io/v1alpha1\nkind: Scenario\nname: s\n"
	trace       = "trace: {nodes: n.csv, pods: p.csv}\n"
)

func TestTraceDefaults(t *testing.T) {
	s, err := Parse("s.yaml", []byte(traceHeader+"policies: [{name: aisched}]\n"+trace))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(TraceMetricKeys, s.Metrics); diff != "" {
		t.Errorf("metrics (-want,+got):\n%s", diff)
	}
	if s.Trace.Inflate != DefaultInflate {
		t.Errorf("inflate %g, want %g", s.Trace.Inflate, DefaultInflate)
	}
}

// header is a valid start of a scenario; its cluster ends at line 5.
const header = "apiVersion: aisched.io/v1alpha1\nkind: Scenario\nname: s\ncluster:\n  nodePools: [{name: n, count: 1, cpu: \"8\", memory: 32Gi}]\n"

func TestParseErrors(t *testing.T) {
	policies := "policies: [{name: aisched}]\n"
	item := "workload:\n  - name: w\n    requests: {cpu: 1}\n"
	tests := []struct {
		name, data, want string
	}{
		{"empty", "", "s.yaml: file is empty: want a Scenario"},
		{"unknown field", header + policies + item + "    replicas: 3\n", `s.yaml:10: workload[0].replicas: unknown field "replicas"`},
		{"bad duration", header + policies + item + "    arrival: soon\n", `s.yaml:10: workload[0].arrival: invalid duration "soon"`},
		{"bad quantity", header + policies + "workload:\n  - name: w\n    requests: {cpu: lots}\n", `s.yaml:9: workload[0].requests: invalid quantity "lots"`},
		{"no policies", header + item, "policies: Required value: at least one policy"},
		{"gang size not dividing", header + policies + "workload:\n  - {name: w, count: 5, gangSize: 2, requests: {cpu: 1}}\n", "workload[0].gangSize: Invalid value: 2: must divide count 5"},
		{"gang size and group", header + policies + "workload:\n  - {name: w, count: 2, gangSize: 2, group: {name: g, minAvailable: 2}, requests: {cpu: 1}}\n", "workload[0].gangSize: Forbidden"},
		{"topology without levels", header + policies + "topologies: [{name: racks}]\n" + item, "topologies[0].levels: Invalid value: 0: want 1 to 8 levels"},
		{"topology slowdown below 1", header + policies + "topologies: [{name: racks, levels: [example.com/rack]}]\ntopologySlowdown: 0.5\n" + item, "topologySlowdown: Invalid value: 0.5: want 1 (no slowdown) to 10"},
		{"topology slowdown too large", header + policies + "topologies: [{name: racks, levels: [example.com/rack]}]\ntopologySlowdown: 11\n" + item, "topologySlowdown: Invalid value: 11: want 1 (no slowdown) to 10"},
		{"topology slowdown without topologies", header + policies + "topologySlowdown: 1.5\n" + item, "topologySlowdown: Invalid value: 1.5: slows gangs spread over the domains of topologies"},
		{"topology level not a label", header + policies + "topologies: [{name: racks, levels: [rack/]}]\n" + item, `topologies[0].levels[0]: Invalid value: "rack/"`},
		{"duplicate policy", header + "policies: [{name: aisched}, {name: aisched}]\n" + item, "s.yaml:6: policies[1].name: Duplicate value"},
		{"bad cluster", "apiVersion: aisched.io/v1alpha1\nkind: Scenario\nname: s\ncluster:\n  nodePools:\n    - {name: n, count: 1, cpu: \"0\", memory: 32Gi}\n" + policies + item,
			`s.yaml:6: cluster.nodePools[0].cpu: Invalid value: "0": must be greater than 0`},
		{"unknown metric", header + policies + "metrics: [speed]\n" + item, `s.yaml:7: metrics[0]: Unsupported value: "speed"`},
		{"unknown namespace", header + policies + item + "    namespace: team-b\n", `s.yaml:10: workload[0].namespace: Not found: "team-b"`},
		{"zero count", header + policies + item + "    count: -2\n", "s.yaml:10: workload[0].count: Invalid value: -2"},
		{"bad load", header + policies + item + "    load: cpu=many\n", `s.yaml:10: workload[0].load: Invalid value: "cpu=many": annotation scheduling.aisched.io/expected-load: cpu="many": not a quantity`},
		{"group cannot gather", header + policies + item + "    count: 2\n    group: {name: g, minAvailable: 3}\n",
			"s.yaml:11: workload[0].group.minAvailable: Invalid value: 3: the workload has only 2 members of group g"},
		{"unknown node", header + policies + item + "    node: n-7\n", `s.yaml:10: workload[0].node: Not found: "n-7"`},
		{"cards beyond any node", header + policies + "workload:\n  - name: w\n    requests: {cpu: 1, nvidia.com/gpu: \"1e100\"}\n",
			`workload[0].requests[nvidia.com/gpu]: Invalid value: "10e99": must be at most 64`},
		{"half a card", header + policies + "workload:\n  - name: w\n    requests: {cpu: 1, nvidia.com/gpu: 500m}\n",
			`workload[0].requests[nvidia.com/gpu]: Invalid value: "500m": must be a whole number of cards`},
		{"quota beyond any cluster", header + policies + "namespaces: [{name: a, quota: {cpu: 1e20}}]\n" + item,
			`namespaces[0].quota[cpu]: Invalid value: "100e18": must be at most 1P`},
		{"negative interval", header + policies + item + "    interval: -1s\n", `s.yaml:10: workload[0].interval: Invalid value: "-1s": must not be negative`},
		{"two documents", header + policies + item + "---\nkind: Scenario\n", "s.yaml:10: want one YAML document, found more"},
		{"trace beside a cluster", header + policies + trace, "s.yaml:5: cluster: Forbidden: a trace replay takes its nodes and pods from the trace"},
		{"trace without pods", traceHeader + policies + "trace: {nodes: n.csv}\n", "s.yaml:5: trace.pods: Required value"},
		{"trace file with a directory", traceHeader + policies + "trace: {nodes: ../n.csv, pods: p.csv}\n", `s.yaml:5: trace.nodes: Invalid value: "../n.csv"`},
		{"trace inflate too large", traceHeader + policies + "trace: {nodes: n.csv, pods: p.csv, inflate: 1e9}\n", "s.yaml:5: trace.inflate: Invalid value: 1e+09: must be between 1 and 10"},
		{"trace with a scenario metric", traceHeader + policies + trace + "metrics: [partial_groups]\n", `metrics[0]: Unsupported value: "partial_groups"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadMissingConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.yaml")
	data := header + "policies: [{name: p, schedulerConfig: nope.yaml}]\nworkload: [{name: w, requests: {cpu: 1}}]\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "policies[0].schedulerConfig") || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("Load error = %v, want one naming policies[0].schedulerConfig and the file", err)
	}
}

func FuzzParse(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(header))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		if err == nil && (len(s.Policies) == 0 || len(s.Workload) == 0 && s.Trace == nil) {
			t.Fatalf("accepted a scenario without policies, or without a workload or a trace")
		}
	})
}

// TestShipped loads every scenario the repository ships.
func TestShipped(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped scenarios found (%v)", err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Error(err)
		}
	}
}

// TestLoadAll: a directory stands for its *.yaml files in name order, a
// file for itself; two files naming one scenario, a directory without
// scenarios and a path that is not there are errors that name them.
func TestLoadAll(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// example without its policy of a scheduler configuration file, named name.
	scenario := func(name string) []byte {
		s := strings.Replace(string(example), "  - name: pcc-abs\n    schedulerConfig: pcc-abs.yaml\n    profile: pcc\n", "", 1)
		return []byte(strings.Replace(s, "name: example\n", "name: "+name+"\n", 1))
	}
	dir, empty := t.TempDir(), t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("b.yaml", scenario("second"))
	write("a.yaml", scenario("first"))
	write("notes.txt", []byte("not a scenario"))
	single := write("c.yml", scenario("third"))
	twin := filepath.Join(t.TempDir(), "twin.yaml")
	if err := os.WriteFile(twin, scenario("first"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name      string
		paths     []string
		wantNames []string
		wantErr   string
	}{
		{name: "directory and file", paths: []string{dir, single}, wantNames: []string{"first", "second", "third"}},
		{name: "two files, one name", paths: []string{dir, twin}, wantErr: filepath.Join(dir, "a.yaml") + " and " + twin + " both name scenario first"},
		{name: "no scenarios", paths: []string{empty}, wantErr: empty + ": no scenario files (*.yaml)"},
		{name: "missing", paths: []string{filepath.Join(dir, "gone.yaml")}, wantErr: "scenario: stat " + filepath.Join(dir, "gone.yaml")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LoadAll(tc.paths)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("scenarios (-want,+got):\n%s", diff)
			}
		})
	}
}
