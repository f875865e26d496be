package nodesim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aisched/aisched/pkg/clusterfile"
)

func TestNodesAddresses(t *testing.T) {
	c := clusterfile.Default()
	nodes := Nodes(c)
	if len(nodes) != c.NodeCount() {
		t.Fatalf("got %d nodes, want %d", len(nodes), c.NodeCount())
	}
	// Node i gets the i-th /22 of 10.128.0.0/9 and 172.16.0.(i+1).
	type addr struct{ Name, CIDR, IP string }
	var got []addr
	for _, n := range nodes[:2] {
		got = append(got, addr{n.Object.Name, n.Object.Spec.PodCIDR, nodeIP(n.Object)})
	}
	want := []addr{{"cpu-0", "10.128.0.0/22", "172.16.0.1"}, {"cpu-1", "10.128.4.0/22", "172.16.0.2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("addresses (-want,+got):\n%s", diff)
	}
	if got := podCIDR(clusterfile.MaxNodes - 1); got != "10.255.252.0/22" {
		t.Errorf("last pod CIDR = %s, want 10.255.252.0/22 (the end of 10.128.0.0/9)", got)
	}
}

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"NVIDIA A100-SXM4-40GB": "NVIDIA-A100-SXM4-40GB",
		"Tesla T4 (16GB)":       "Tesla-T4-16GB",
		"--x--":                 "x",
	} {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
}
