package trace

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// FuzzReadPods checks that ReadPods never panics and that what it accepts
// keeps the limits of the package doc.
func FuzzReadPods(f *testing.F) {
	for _, file := range []string{"testdata/pods.csv", "testdata/pods_5col.csv"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("\uFEFF" + header5 + "\r\np1,1,1,2,1000\r\n"))
	f.Add([]byte(header11 + "\np1,1,1,1,500,\"T4|\",LS,Running,1,2,\n"))
	f.Add([]byte(header5 + "\np\"1,1,1,1,500\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, err := ReadPods(bytes.NewReader(data), "f.csv")
		if err != nil {
			if pods != nil {
				t.Errorf("ReadPods returned %d pods with error %v", len(pods), err)
			}
			if !strings.HasPrefix(err.Error(), "f.csv: ") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		for _, p := range pods {
			if p.Name == "" || p.MilliCPU < 0 || p.MemoryMiB < 0 || p.Creation < 0 || p.Deletion < 0 || p.Scheduled < 0 {
				t.Errorf("accepted %+v", p)
			}
			if p.NumGPU < 0 || p.NumGPU > maxGPUs || p.TotalGPUMilli() != int64(p.NumGPU)*p.GPUMilli {
				t.Errorf("accepted GPU request %+v", p)
			}
			for _, m := range p.GPUSpec {
				if m == "" {
					t.Errorf("accepted an empty model in %q", p.GPUSpec)
				}
			}
		}
	})
}

// FuzzReadNodes checks that ReadNodes never panics and that what it accepts
// keeps the limits of the package doc.
func FuzzReadNodes(f *testing.F) {
	data, err := os.ReadFile("testdata/nodes.csv")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,65,T4\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, err := ReadNodes(bytes.NewReader(data), "f.csv")
		if err != nil {
			if nodes != nil {
				t.Errorf("ReadNodes returned %d nodes with error %v", len(nodes), err)
			}
			return
		}
		for _, n := range nodes {
			if n.Name == "" || n.MilliCPU < 0 || n.MemoryMiB < 0 || n.GPUs < 0 || n.GPUs > maxGPUs {
				t.Errorf("accepted %+v", n)
			}
		}
	})
}
