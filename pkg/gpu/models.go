package gpu

import (
	"slices"
	"strings"
)

// ModelSpec is what the public data sheets of a card model say.
type ModelSpec struct {
	Cores             int64
	ComputeCapability float64
	BandwidthGBps     int64
	ClockMHz          int64
}

// knownModels maps a distinctive part of the normalized product name to
// its data sheet. It fills the gaps of inventories built from GFD labels
// (which carry no core count), and of nvidia-smi, which reports neither
// cores nor bandwidth. More specific keys come first.
var knownModels = []struct {
	key  string
	spec ModelSpec
}{
	{"h200", ModelSpec{16896, 9.0, 4800, 1980}},
	{"gh200", ModelSpec{16896, 9.0, 4000, 1980}},
	{"h100-pcie", ModelSpec{14592, 9.0, 2000, 1755}},
	{"h100", ModelSpec{16896, 9.0, 3350, 1980}},
	{"h800", ModelSpec{16896, 9.0, 3350, 1980}},
	{"a100-sxm4-80gb", ModelSpec{6912, 8.0, 2039, 1410}},
	{"a100-pcie-80gb", ModelSpec{6912, 8.0, 1935, 1410}},
	{"a100", ModelSpec{6912, 8.0, 1555, 1410}},
	{"a800", ModelSpec{6912, 8.0, 2039, 1410}},
	{"a40", ModelSpec{10752, 8.6, 696, 1740}},
	{"a30", ModelSpec{3584, 8.0, 933, 1440}},
	{"a10", ModelSpec{9216, 8.6, 600, 1695}},
	{"l40s", ModelSpec{18176, 8.9, 864, 2520}},
	{"l40", ModelSpec{18176, 8.9, 864, 2490}},
	{"l4", ModelSpec{7424, 8.9, 300, 2040}},
	{"rtx-a6000", ModelSpec{10752, 8.6, 768, 1800}},
	{"rtx-4090", ModelSpec{16384, 8.9, 1008, 2520}},
	{"rtx-3090", ModelSpec{10496, 8.6, 936, 1695}},
	{"v100", ModelSpec{5120, 7.0, 900, 1530}},
	{"t4", ModelSpec{2560, 7.5, 320, 1590}},
	{"p100", ModelSpec{3584, 6.0, 732, 1480}},
	{"p40", ModelSpec{3840, 6.1, 346, 1531}},
	{"p4", ModelSpec{2560, 6.1, 192, 1114}},
}

// LookupModel returns the data sheet of a product name such as
// "NVIDIA-A100-SXM4-40GB" or "Tesla T4"; ok is false for unknown models. A
// key matches when its words occur in a row among the name's words.
func LookupModel(product string) (ModelSpec, bool) {
	words := strings.Split(NormalizeModel(product), "-")
	for _, m := range knownModels {
		if containsRun(words, strings.Split(m.key, "-")) {
			return m.spec, true
		}
	}
	return ModelSpec{}, false
}

func containsRun(words, run []string) bool {
	for i := 0; i+len(run) <= len(words); i++ {
		if slices.Equal(words[i:i+len(run)], run) {
			return true
		}
	}
	return false
}
