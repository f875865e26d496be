package trace

import (
	"os"
	"path/filepath"
	"testing"
)

// openbDir holds the published Alibaba GPU trace (cluster-trace-gpu-v2023 of
// github.com/alibaba/clusterdata), which is not part of the repository: the
// developers' data directory beside the checkout. Tests skip without it.
const openbDir = "../../../../shared/traces/alibaba-gpu-v2023"

// TestOpenb reads the published openb files and checks them against the
// trace's README.
func TestOpenb(t *testing.T) {
	if _, err := os.Stat(openbDir); err != nil {
		t.Skipf("trace not available: %v", err)
	}
	var capacityMilli int64
	t.Run("nodes", func(t *testing.T) {
		tests := []struct {
			file     string
			wantRows int
			wantGPUs int64
		}{
			{"openb_node_list_gpu_node.csv", 1213, 6212},
			// The same plus 310 CPU-only nodes.
			{"openb_node_list_all_node.csv", 1523, 6212},
		}
		for _, tc := range tests {
			t.Run(tc.file, func(t *testing.T) {
				nodes := readFile(t, ReadNodes, filepath.Join(openbDir, tc.file))
				gotGPUs := CapacityMilli(nodes) / 1000
				if len(nodes) != tc.wantRows || gotGPUs != tc.wantGPUs {
					t.Errorf("%d nodes with %d GPUs, want %d with %d", len(nodes), gotGPUs, tc.wantRows, tc.wantGPUs)
				}
				if tc.file == "openb_node_list_gpu_node.csv" {
					capacityMilli = CapacityMilli(nodes)
				}
			})
		}
	})
	pods := map[string][]Pod{}
	t.Run("pods", func(t *testing.T) {
		tests := []struct {
			file       string
			wantRows   int
			wantShared int
		}{
			// The shared counts are the files' own, counted apart from
			// this package with awk.
			{"openb_pod_list_default.csv", 8152, 3078},
			{"openb_pod_list_gpushare40.csv", 8152, 4001},
			{"openb_pod_list_multigpu20.csv", 8324, 3078},
			{"openb_pod_list_cpu050.csv", 7439, 3078},
		}
		for _, tc := range tests {
			t.Run(tc.file, func(t *testing.T) {
				got := readFile(t, ReadPods, filepath.Join(openbDir, tc.file))
				pods[tc.file] = got
				var gotShared int
				for _, p := range got {
					if p.Shared() {
						gotShared++
					}
				}
				t.Logf("%s: %d pods, %d share a card, %d milli GPU", tc.file, len(got), gotShared, sumGPUMilli(got))
				if len(got) != tc.wantRows || gotShared != tc.wantShared {
					t.Errorf("%d pods, %d shared; want %d, %d", len(got), gotShared, tc.wantRows, tc.wantShared)
				}
			})
		}
	})
	t.Run("workload", func(t *testing.T) {
		def := pods["openb_pod_list_default.csv"]
		if def == nil || capacityMilli == 0 {
			t.Skip("default pod list or GPU node list not read")
		}
		for seed := int64(42); seed <= 51; seed++ {
			seq := Workload(def, seed, 1.3, capacityMilli)
			total := sumGPUMilli(seq)
			t.Logf("seed %d: %d pods (%d copies), %d milli GPU", seed, len(seq), len(seq)-len(def), total)
			if target := capacityMilli * 13 / 10; total < target || total-seq[len(seq)-1].TotalGPUMilli() >= target {
				t.Errorf("seed %d: %d milli GPU requested; want the last pod to reach 130%% of %d", seed, total, capacityMilli)
			}
		}
	})
}
