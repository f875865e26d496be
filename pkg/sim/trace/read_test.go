package trace

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// Headers of the two pod list forms.
const (
	header5  = "name,cpu_milli,memory_mib,num_gpu,gpu_milli"
	header11 = header5 + ",gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)

// readFile parses the file at path with read, naming it by its base name.
func readFile[T any](t *testing.T, read func(io.Reader, string) ([]T, error), path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := read(f, filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestReadNodes(t *testing.T) {
	nodes := readFile(t, ReadNodes, "testdata/nodes.csv")
	if len(nodes) != 20 {
		t.Errorf("read %d nodes, want 20", len(nodes))
	}
	gotGPUs := map[string]int{}
	for _, n := range nodes {
		gotGPUs[n.Model] += n.GPUs
	}
	// 4 CPU-only nodes, 6 x 2 T4, 4 x 8 V100M16, 3 x 8 G2, 2 x 2 P100, 1 x 1 A10.
	wantGPUs := map[string]int{"": 0, "T4": 12, "V100M16": 32, "G2": 24, "P100": 4, "A10": 1}
	if diff := cmp.Diff(wantGPUs, gotGPUs); diff != "" {
		t.Errorf("GPUs per model (-want,+got):\n%s", diff)
	}
	// 12 + 32 + 24 + 4 + 1 = 73 cards.
	if got := CapacityMilli(nodes); got != 73000 {
		t.Errorf("CapacityMilli = %d, want 73000", got)
	}
	want := []Node{
		{Name: "sample-cpu-0", MilliCPU: 32000, MemoryMiB: 131072},
		{Name: "sample-t4-0", MilliCPU: 48000, MemoryMiB: 196608, GPUs: 2, Model: "T4"},
	}
	if diff := cmp.Diff(want, []Node{nodes[0], nodes[4]}); diff != "" {
		t.Errorf("rows 1 and 5 (-want,+got):\n%s", diff)
	}
}

func TestReadPods(t *testing.T) {
	tests := []struct {
		name          string
		file          string
		wantLen       int
		wantGPUMilli  int64
		wantShared    int
		wantSomePods  map[int]Pod
		wantScheduled int
	}{
		{
			name:         "11 columns",
			file:         "testdata/pods.csv",
			wantLen:      60,
			wantGPUMilli: 50110,
			wantShared:   24,
			wantSomePods: map[int]Pod{
				0: {Name: "sample-pod-000", MilliCPU: 12000, MemoryMiB: 16384, NumGPU: 1, GPUMilli: 1000,
					GPUSpec: []string{"V100M16", "V100M32"}, QoS: "Burstable", Phase: "Running",
					Creation: 832967, Deletion: 927226, Scheduled: 832974},
				// Pending: scheduled_time is empty.
				12: {Name: "sample-pod-012", MilliCPU: 12000, MemoryMiB: 8192, QoS: "BE", Phase: "Pending",
					Creation: 996382, Deletion: 1320188},
				25: {Name: "sample-pod-025", MilliCPU: 1000, MemoryMiB: 4096, NumGPU: 4, GPUMilli: 1000,
					GPUSpec: []string{"T4", "P100"}, QoS: "BE", Phase: "Succeeded",
					Creation: 214301, Deletion: 467360, Scheduled: 214320},
			},
			// 11 of the 60 rows are pending.
			wantScheduled: 49,
		},
		{
			name: "5 columns",
			file: "testdata/pods_5col.csv",
			// The first 12 rows of pods.csv: 1000+100+1000+300+750+100+100+1000+0+1000+1000+1000.
			wantLen:      12,
			wantGPUMilli: 7350,
			wantShared:   5,
			wantSomePods: map[int]Pod{
				1: {Name: "sample-pod-001", MilliCPU: 12000, MemoryMiB: 8192, NumGPU: 1, GPUMilli: 100},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods := readFile(t, ReadPods, tc.file)
			if len(pods) != tc.wantLen {
				t.Fatalf("read %d pods, want %d", len(pods), tc.wantLen)
			}
			var gotGPUMilli int64
			var gotShared, gotScheduled int
			for _, p := range pods {
				gotGPUMilli += p.TotalGPUMilli()
				if p.Shared() {
					gotShared++
				}
				if p.Scheduled != 0 {
					gotScheduled++
				}
			}
			if gotGPUMilli != tc.wantGPUMilli || gotShared != tc.wantShared || gotScheduled != tc.wantScheduled {
				t.Errorf("GPU milli %d, shared %d, scheduled %d; want %d, %d, %d",
					gotGPUMilli, gotShared, gotScheduled, tc.wantGPUMilli, tc.wantShared, tc.wantScheduled)
			}
			gotSome := map[int]Pod{}
			for i := range tc.wantSomePods {
				gotSome[i] = pods[i]
			}
			if diff := cmp.Diff(tc.wantSomePods, gotSome); diff != "" {
				t.Errorf("pods (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestReadPodsForms(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantPods []Pod
	}{
		{
			name: "header only",
			in:   header11 + "\n",
		},
		{
			name: "byte order mark and CRLF",
			in:   "\uFEFF" + header5 + "\r\np1,1000,512,1,250\r\np2,0,0,2,1000\r\n",
			wantPods: []Pod{
				{Name: "p1", MilliCPU: 1000, MemoryMiB: 512, NumGPU: 1, GPUMilli: 250},
				{Name: "p2", NumGPU: 2, GPUMilli: 1000},
			},
		},
		{
			name: "columns in another order, spaces and empty times",
			in: "gpu_milli,num_gpu,name,cpu_milli,memory_mib,qos,pod_phase,creation_time,deletion_time,scheduled_time,gpu_spec\n" +
				"1000, 8 ,p1,64000,1024,LS,Pending,,, ,\" T4 | V100M32 \"\n",
			wantPods: []Pod{
				{Name: "p1", MilliCPU: 64000, MemoryMiB: 1024, NumGPU: 8, GPUMilli: 1000,
					GPUSpec: []string{"T4", "V100M32"}, QoS: "LS", Phase: "Pending"},
			},
		},
		{
			name:     "no final newline",
			in:       header5 + "\np1,1,2,0,0",
			wantPods: []Pod{{Name: "p1", MilliCPU: 1, MemoryMiB: 2}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadPods(strings.NewReader(tc.in), "p.csv")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantPods, got); diff != "" {
				t.Errorf("pods (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestReadPodsErrors(t *testing.T) {
	const (
		want   = "want " + header5 + " or " + header11
		good11 = "p0,1000,1024,1,500,T4,LS,Running,1,2,3\n"
	)
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"empty file", "", "p.csv: file is empty, want a header row " + header5 + " or " + header11},
		{"blank lines only", "\n\r\n\n", "p.csv: file is empty, want a header row " + header5 + " or " + header11},
		{"node header", "sn,cpu_milli,memory_mib,gpu,model\n",
			`p.csv: header: unknown column "sn", "gpu", "model", ` + want},
		{"empty column name", header5 + ",\n", `p.csv: header: unknown column "", ` + want},
		{"missing column", "name,cpu_milli,memory_mib,num_gpu\n", "p.csv: header: missing column gpu_milli, " + want},
		{"part of the 11 columns", header5 + ",gpu_spec,qos\n",
			"p.csv: header: missing column pod_phase, creation_time, deletion_time, scheduled_time, " + want},
		{"duplicate column", header5 + ",name\n", "p.csv: header: column name appears twice"},
		{"bad quote in header", "name,\"cpu\"x\n", `p.csv: header: extraneous or missing " in quoted-field`},
		{"too few columns", header5 + "\np1,1,1,0,0\np2,1,1,0\n", "p.csv: row 2: 4 columns, want 5 as in the header"},
		{"too many columns", header11 + "\n" + good11 + "p2,1,1,0,0,,LS,Running,1,2,3,4\n",
			"p.csv: row 2: 12 columns, want 11 as in the header"},
		{"row counted after CRLF and BOM", "\uFEFF" + header5 + "\r\np1,1,1,0,0\r\np2,1,1,x,0\r\n",
			`p.csv: row 2: column num_gpu: "x" is not a whole number`},
		{"bare quote", header5 + "\np1,1,1,0,0\np\"2,1,1,0,0\n", `p.csv: row 2 (line 3): bare " in non-quoted-field`},
		{"not a number", header5 + "\np1,1,1,1,abc\n", `p.csv: row 1: column gpu_milli: "abc" is not a whole number`},
		{"fraction", header5 + "\np1,0.5,1,0,0\n", `p.csv: row 1: column cpu_milli: "0.5" is not a whole number`},
		{"empty number", header5 + "\np1,1,,0,0\n", `p.csv: row 1: column memory_mib: "" is not a whole number`},
		{"out of range", header5 + "\np1,99999999999999999999,1,0,0\n",
			`p.csv: row 1: column cpu_milli: "99999999999999999999" is out of range`},
		{"negative", header5 + "\np1,-5,1,0,0\n", "p.csv: row 1: column cpu_milli: -5 is negative"},
		{"too many cards", header5 + "\np1,1,1,65,1000\n", "p.csv: row 1: column num_gpu: 65 is more than 64"},
		{"more than a card", header5 + "\np1,1,1,1,1001\n", "p.csv: row 1: column gpu_milli: 1001 is more than 1000"},
		{"share without a card", header5 + "\np1,1,1,0,500\n", "p.csv: row 1: column gpu_milli: 500 with num_gpu 0, want 0"},
		{"one card without a share", header5 + "\np1,1,1,1,0\n", "p.csv: row 1: column gpu_milli: 0 with num_gpu 1, want 1..1000"},
		{"several cards shared", header5 + "\np1,1,1,2,500\n",
			"p.csv: row 1: column gpu_milli: 500 with num_gpu 2, want 1000: a multi-GPU pod takes whole cards"},
		{"empty name", header5 + "\n ,1,1,0,0\n", "p.csv: row 1: column name: is empty"},
		{"duplicate name", header5 + "\np1,1,1,0,0\np2,1,1,0,0\np1,1,1,0,0\n",
			`p.csv: row 3: column name: "p1" is also the name in row 1`},
		{"empty model in gpu_spec", header11 + "\n" + "p1,1,1,1,1000,T4||P100,LS,Running,1,2,3\n",
			`p.csv: row 1: column gpu_spec: "T4||P100" has an empty model name, want names separated by |`},
		{"gpu_spec of a bar", header11 + "\n" + "p1,1,1,1,1000,|,LS,Running,1,2,3\n",
			`p.csv: row 1: column gpu_spec: "|" has an empty model name, want names separated by |`},
		{"negative time", header11 + "\n" + good11 + "p1,1,1,0,0,,LS,Running,-1,2,3\n",
			"p.csv: row 2: column creation_time: -1 is negative"},
		{"bad time", header11 + "\n" + "p1,1,1,0,0,,LS,Running,1,2,3s\n",
			`p.csv: row 1: column scheduled_time: "3s" is not a whole number`},
		{"first error of the row", header5 + "\n,x,-1,0,0\n", "p.csv: row 1: column name: is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadPods(strings.NewReader(tc.in), "p.csv")
			if err == nil {
				t.Fatalf("ReadPods = %d pods, want error %q", len(got), tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
			// The good rows before the bad one are not returned either.
			if got != nil {
				t.Errorf("ReadPods returned %d pods with its error, want none", len(got))
			}
		})
	}
}

func TestReadNodesErrors(t *testing.T) {
	const header = "sn,cpu_milli,memory_mib,gpu,model"
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"empty file", "", "n.csv: file is empty, want a header row " + header},
		{"pod header", header5 + "\n", `n.csv: header: unknown column "name", "num_gpu", "gpu_milli", want ` + header},
		{"too many cards", header + "\nn1,1,1,65,T4\n", "n.csv: row 1: column gpu: 65 is more than 64"},
		{"negative memory", header + "\nn1,1,-1,0,\n", "n.csv: row 1: column memory_mib: -1 is negative"},
		{"empty name", header + "\nn1,1,1,0,\n,1,1,0,\n", "n.csv: row 2: column sn: is empty"},
		{"duplicate name", header + "\nn1,1,1,0,\nn1,1,1,0,\n", `n.csv: row 2: column sn: "n1" is also the name in row 1`},
		{"too few columns", header + "\nn1,1,1,0\n", "n.csv: row 1: 4 columns, want 5 as in the header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadNodes(strings.NewReader(tc.in), "n.csv")
			if err == nil {
				t.Fatalf("ReadNodes = %d nodes, want error %q", len(got), tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestReadPodsReadError(t *testing.T) {
	disk := errors.New("disk failed")
	tests := []struct {
		name    string
		r       io.Reader
		wantErr string
	}{
		{"in the header", iotest.ErrReader(disk), "p.csv: header: disk failed"},
		{"in a row", io.MultiReader(strings.NewReader(header5+"\np1,1,1,0,0\n"), iotest.ErrReader(disk)), "p.csv: row 2: disk failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadPods(tc.r, "p.csv")
			if !errors.Is(err, disk) {
				t.Fatalf("ReadPods error = %v, want one wrapping %v", err, disk)
			}
			if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
		})
	}
}
