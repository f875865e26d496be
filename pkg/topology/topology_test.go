package topology

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func TestDomain(t *testing.T) {
	racks := OfLabels("racks", "topology racks", []string{"example.com/block", "example.com/rack"})
	// Racks named alike in two blocks are two domains; a node without a
	// level's label is outside that level.
	tests := []struct {
		node       *corev1.Node
		level      int
		wantDomain string
		wantOK     bool
	}{
		{node("a", map[string]string{"example.com/block": "b1", "example.com/rack": "r1"}), 1, "b1/r1", true},
		{node("b", map[string]string{"example.com/block": "b2", "example.com/rack": "r1"}), 1, "b2/r1", true},
		{node("c", map[string]string{"example.com/block": "b2"}), 0, "b2", true},
		{node("c", map[string]string{"example.com/block": "b2"}), 1, "", false},
		{node("d", nil), 0, "", false},
	}
	for _, tc := range tests {
		domain, ok := racks.Domain(tc.node, tc.level)
		if domain != tc.wantDomain || ok != tc.wantOK {
			t.Errorf("node %s level %d: %q %v, want %q %v", tc.node.Name, tc.level, domain, ok, tc.wantDomain, tc.wantOK)
		}
	}
	if got := racks.Words(1, "b2/r1"); got != "rack r1" {
		t.Errorf("words %q", got)
	}
	if got := racks.Selector(1, "b2/r1"); got != "example.com/rack=r1" {
		t.Errorf("selector %q", got)
	}
	hyper := OfMembers("volcano", "Volcano HyperNodes", []Level{{Key: "2", Name: "tier 2"}, {Key: "1", Name: "tier 1"}},
		map[string][]string{"n0": {"s4", "s0"}})
	if d, ok := hyper.Domain(node("n0", nil), 1); d != "s0" || !ok {
		t.Errorf("member domain %q %v", d, ok)
	}
	if _, ok := hyper.Domain(node("n9", nil), 1); ok {
		t.Error("a node in no HyperNode is inside tier 1")
	}
}

func TestResolve(t *testing.T) {
	racks := OfLabels("racks", "topology racks", []string{"example.com/block", "example.com/rack", "kubernetes.io/hostname"})
	gpus := OfLabels("gpus", "topology gpus", []string{"nvidia.com/gpu.clique"})
	tops := []*Topology{gpus, racks}
	keys := func(c Constraint) Constraint {
		c.TopologyKey, c.RequiredKey, c.PreferredKey, c.SliceKey = "t", "r", "p", "s"
		return c
	}
	tests := []struct {
		name    string
		c       Constraint
		want    *Resolved
		wantErr string
	}{{
		name: "required and preferred",
		c:    keys(Constraint{Required: "example.com/block", Preferred: "example.com/rack"}),
		want: &Resolved{Topology: racks, Required: 0, Preferred: 1, Slice: -1},
	}, {
		name: "the topology found by its level",
		c:    keys(Constraint{Required: "nvidia.com/gpu.clique"}),
		want: &Resolved{Topology: gpus, Required: 0, Preferred: -1, Slice: -1},
	}, {
		name: "slices",
		c:    keys(Constraint{Required: "example.com/block", SliceLevel: "example.com/rack", SliceSize: 16}),
		want: &Resolved{Topology: racks, Required: 0, Preferred: -1, Slice: 1, SliceSize: 16},
	}, {
		name:    "no topology of that name",
		c:       keys(Constraint{Topology: "rack", Required: "example.com/rack"}),
		wantErr: `t="rack": there is no topology "rack"; known levels: topology gpus: nvidia.com/gpu.clique; topology racks: example.com/block, example.com/rack, kubernetes.io/hostname`,
	}, {
		name:    "a level the topology named lacks",
		c:       keys(Constraint{Topology: "gpus", Required: "example.com/rack"}),
		wantErr: `r="example.com/rack": no topology has the level "example.com/rack"; known levels: topology gpus: nvidia.com/gpu.clique`,
	}, {
		name:    "levels of two topologies",
		c:       keys(Constraint{Required: "nvidia.com/gpu.clique", Preferred: "kubernetes.io/hostname"}),
		wantErr: `r: no one topology has all of the levels "nvidia.com/gpu.clique", "kubernetes.io/hostname"; known levels: topology gpus: nvidia.com/gpu.clique; topology racks: example.com/block, example.com/rack, kubernetes.io/hostname`,
	}, {
		name:    "preferred coarser than required",
		c:       keys(Constraint{Required: "example.com/rack", Preferred: "example.com/block"}),
		wantErr: `p="example.com/block": level "example.com/block" is coarser than the required "example.com/rack" (r); prefer a finer level or the same`,
	}, {
		name:    "slices not finer",
		c:       keys(Constraint{Required: "example.com/rack", SliceLevel: "example.com/block", SliceSize: 2}),
		wantErr: `s="example.com/block": a slice's level must be finer than the group's ("example.com/rack")`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.c, tops)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Constraint = tc.c
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(Topology{})); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLevels(t *testing.T) {
	for _, tc := range []struct {
		r    Resolved
		want []int
	}{
		{Resolved{Required: 0, Preferred: 2}, []int{2, 1, 0}},
		{Resolved{Required: 1, Preferred: -1}, []int{1}},
		{Resolved{Required: -1, Preferred: 1}, []int{1, 0}},
		{Resolved{Required: -1, Preferred: -1}, nil},
	} {
		if diff := cmp.Diff(tc.want, tc.r.Levels()); diff != "" {
			t.Errorf("%+v (-want,+got):\n%s", tc.r, diff)
		}
	}
}

func TestOfPodAisched(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        Constraint
		wantOK      bool
		wantErr     string
	}{{
		name:        "none",
		annotations: map[string]string{"other": "x"},
	}, {
		name: "every key",
		annotations: map[string]string{"topology.aisched.io/topology": "racks", "topology.aisched.io/required": "example.com/block",
			"topology.aisched.io/preferred": "example.com/rack", "topology.aisched.io/slice-level": "nvidia.com/gpu.clique", "topology.aisched.io/slice-size": "16"},
		want: Constraint{Topology: "racks", Required: "example.com/block", Preferred: "example.com/rack", SliceLevel: "nvidia.com/gpu.clique", SliceSize: 16,
			TopologyKey: "annotation topology.aisched.io/topology", RequiredKey: "annotation topology.aisched.io/required",
			PreferredKey: "annotation topology.aisched.io/preferred", SliceKey: "annotation topology.aisched.io/slice-level"},
		wantOK: true,
	}, {
		name:        "a bad level",
		annotations: map[string]string{"topology.aisched.io/required": "rack/"},
		wantOK:      true,
		wantErr:     `annotation topology.aisched.io/required="rack/": want a level's node label, such as example.com/rack:`,
	}, {
		name:        "slice size alone",
		annotations: map[string]string{"topology.aisched.io/slice-size": "4"},
		wantOK:      true,
		wantErr:     "annotation topology.aisched.io/slice-level and annotation topology.aisched.io/slice-size go together",
	}, {
		name:        "slice size out of bounds",
		annotations: map[string]string{"topology.aisched.io/slice-level": "r", "topology.aisched.io/slice-size": "0"},
		wantOK:      true,
		wantErr:     `annotation topology.aisched.io/slice-size="0": want a whole number of members from 1 to 10000`,
	}, {
		name:        "a topology and no level",
		annotations: map[string]string{"topology.aisched.io/topology": "racks"},
		wantOK:      true,
		wantErr:     `annotation topology.aisched.io/topology="racks" names a topology but no level`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := OfPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}})
			if ok != tc.wantOK {
				t.Errorf("ok %v, want %v", ok, tc.wantOK)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
