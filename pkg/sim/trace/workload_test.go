package trace

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gpuPod returns a pod named name that asks for numGPU cards, each milli
// thousandths of a card.
func gpuPod(name string, numGPU int, milli int64) Pod {
	return Pod{Name: name, MilliCPU: 1000, MemoryMiB: 1024, NumGPU: numGPU, GPUMilli: milli}
}

// names returns the names of pods.
func names(pods []Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// sumGPUMilli returns the summed TotalGPUMilli of pods.
func sumGPUMilli(pods []Pod) int64 {
	var sum int64
	for _, p := range pods {
		sum += p.TotalGPUMilli()
	}
	return sum
}

func TestTotalGPUMilli(t *testing.T) {
	tests := []struct {
		name       string
		pod        Pod
		wantMilli  int64
		wantShared bool
	}{
		{"CPU only", gpuPod("p", 0, 0), 0, false},
		{"part of a card", gpuPod("p", 1, 460), 460, true},
		{"whole card", gpuPod("p", 1, 1000), 1000, false},
		// gpu_milli of a multi-GPU row is the share of each card: 4 x 1000.
		{"four cards", gpuPod("p", 4, 1000), 4000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.pod.TotalGPUMilli(); got != tc.wantMilli {
				t.Errorf("TotalGPUMilli = %d, want %d", got, tc.wantMilli)
			}
			if got := tc.pod.Shared(); got != tc.wantShared {
				t.Errorf("Shared = %t, want %t", got, tc.wantShared)
			}
		})
	}
}

func TestWorkload(t *testing.T) {
	sample := readFile(t, ReadPods, "testdata/pods.csv")
	cpuOnly := []Pod{gpuPod("c1", 0, 0), gpuPod("c2", 0, 0)}
	// anyLen leaves the length to the random draws.
	const anyLen = -1
	tests := []struct {
		name          string
		pods          []Pod
		inflate       float64
		capacityMilli int64
		wantLen       int
		wantCopies    bool
	}{
		// The sample asks for 50,110 milli; 1.3 x 73,000 = 94,900.
		{name: "inflated to 130%", pods: sample, inflate: 1.3, capacityMilli: 73000, wantLen: anyLen, wantCopies: true},
		// 0.5 x 73,000 = 36,500 <= 50,110: the list alone reaches it.
		{name: "list reaches the target", pods: sample, inflate: 0.5, capacityMilli: 73000, wantLen: 60},
		// The list has 1,000 milli; 2 x 1,000 = 2,000 takes exactly one copy.
		{name: "one copy", pods: []Pod{gpuPod("a", 1, 1000)}, inflate: 2, capacityMilli: 1000, wantLen: 2, wantCopies: true},
		// 1.0005 x 1,000 = 1,000.5, rounded to 1,001: a second 500 is needed.
		{name: "target rounded", pods: []Pod{gpuPod("a", 1, 500)}, inflate: 1.0005, capacityMilli: 1000, wantLen: 3, wantCopies: true},
		{name: "no GPU asked", pods: cpuOnly, inflate: 1.3, capacityMilli: 1000, wantLen: 2},
		{name: "empty list", inflate: 1.3, capacityMilli: 1000},
		{name: "infinite inflate", pods: cpuOnly[:1], inflate: math.Inf(1), capacityMilli: 1000, wantLen: 1},
		{name: "NaN inflate", pods: sample, inflate: math.NaN(), capacityMilli: 73000, wantLen: 60},
	}
	dup := regexp.MustCompile(`^(.*)-dup-([0-9]+)$`)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seq := Workload(tc.pods, 42, tc.inflate, tc.capacityMilli)
			if tc.wantLen != anyLen && len(seq) != tc.wantLen {
				t.Errorf("len = %d, want %d", len(seq), tc.wantLen)
			}
			if len(seq) < len(tc.pods) {
				t.Fatalf("len = %d, shorter than the %d pods", len(seq), len(tc.pods))
			}
			// The originals all come first, each exactly once.
			gotFirst := names(seq[:len(tc.pods)])
			wantFirst := names(tc.pods)
			slices.Sort(gotFirst)
			slices.Sort(wantFirst)
			if diff := cmp.Diff(wantFirst, gotFirst); diff != "" {
				t.Errorf("shuffled originals (-want,+got):\n%s", diff)
			}
			// The copies come from the list, numbered 1, 2, ...
			byName := map[string]Pod{}
			for _, p := range tc.pods {
				byName[p.Name] = p
			}
			for i, p := range seq[len(tc.pods):] {
				m := dup.FindStringSubmatch(p.Name)
				if m == nil || m[2] != strconv.Itoa(i+1) {
					t.Fatalf("copy %d is named %q, want <name>-dup-%d", i+1, p.Name, i+1)
				}
				want, ok := byName[m[1]]
				if !ok {
					t.Fatalf("copy %q is of no pod of the list", p.Name)
				}
				want.Name = p.Name
				if diff := cmp.Diff(want, p); diff != "" {
					t.Errorf("copy %q (-want,+got):\n%s", p.Name, diff)
				}
			}
			// Inflation stops at the first pod that reaches the target.
			if gotCopies := len(seq) > len(tc.pods); gotCopies != tc.wantCopies {
				t.Errorf("copies drawn = %t, want %t", gotCopies, tc.wantCopies)
			}
			if tc.wantCopies {
				target := math.Round(tc.inflate * float64(tc.capacityMilli))
				if sum := sumGPUMilli(seq); float64(sum) < target {
					t.Errorf("sequence asks for %d milli, below the target %.0f", sum, target)
				}
				if sum := sumGPUMilli(seq[:len(seq)-1]); float64(sum) >= target {
					t.Errorf("sequence without its last pod asks for %d milli, already at the target %.0f", sum, target)
				}
			}
		})
	}
}

func TestWorkloadSeed(t *testing.T) {
	pods := readFile(t, ReadPods, "testdata/pods.csv")
	a := Workload(pods, 7, 1.3, 73000)
	if diff := cmp.Diff(a, Workload(pods, 7, 1.3, 73000)); diff != "" {
		t.Errorf("same seed, different sequences (-first,+second):\n%s", diff)
	}
	b := Workload(pods, 8, 1.3, 73000)
	if slices.Equal(names(a[:len(pods)]), names(b[:len(pods)])) {
		t.Errorf("seeds 7 and 8 shuffle the same order: %v", names(a[:len(pods)]))
	}
	if slices.Equal(names(a[:len(pods)]), names(pods)) {
		t.Errorf("seed 7 keeps the order of the list")
	}
}

// TestWorkloadPinned pins the generator: changing it changes every sequence,
// and so every result a replay has published.
func TestWorkloadPinned(t *testing.T) {
	var pods []Pod
	for i := range 5 {
		pods = append(pods, gpuPod(fmt.Sprintf("p%d", i), 1, 1000))
	}
	// 5 x 1,000 milli; 1.6 x 5,000 = 8,000 takes three copies.
	got := names(Workload(pods, 42, 1.6, 5000))
	want := []string{"p2", "p1", "p3", "p0", "p4", "p0-dup-1", "p4-dup-2", "p4-dup-3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sequence of seed 42 (-want,+got):\n%s", diff)
	}
}
