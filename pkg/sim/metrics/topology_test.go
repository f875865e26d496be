package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTopology(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	got := Topology([]TopologyGroup{
		// Inside rack r1 (required) and node n1 (preferred): 1 domain.
		{Required: []string{"r1", "r1"}, Preferred: []string{"n1", "n1"}},
		// Spread over two racks: required failed; preferred over 2 nodes.
		{Required: []string{"r1", "r2"}, Preferred: []string{"n2", "n3"}},
		// Slices of 2: 2 in r1, 2 in r2 whole; no required level: spread is
		// not measured.
		{Slice: []string{"r1", "r1", "r2", "r2"}, SliceSize: 2},
		// Slices of 2 split 3 + 1.
		{Required: []string{"b1", "b1", "b1", "b1"}, Slice: []string{"r1", "r1", "r1", "r2"}, SliceSize: 2},
		// A member outside the level is not inside one domain.
		{Required: []string{"", ""}},
	})
	want := TopologyResult{
		// 2 of the 4 groups with a required level (groups 1 and 4).
		RequiredShare: f(0.5),
		// 1 of 2.
		PreferredShare: f(0.5),
		// Groups 1, 2, 4, 5 at their preferred or required level: 1 + 2 + 1 + 1 = 5 over 4.
		DomainsSpanned: f(1.25),
		// 1 of 2.
		SlicesWhole: f(0.5),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if r := Topology(nil); r.RequiredShare != nil || r.DomainsSpanned != nil {
		t.Errorf("no groups: %+v, want nothing measured", r)
	}
}

func TestTopologyGroupSpread(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    TopologyGroup
		want bool
	}{
		{"inside its preferred domain", TopologyGroup{Required: []string{"b1", "b1"}, Preferred: []string{"r1", "r1"}}, false},
		{"inside its required domain, over two preferred ones", TopologyGroup{Required: []string{"b1", "b1"}, Preferred: []string{"r1", "r2"}}, true},
		{"over two required domains", TopologyGroup{Required: []string{"b1", "b2"}}, true},
		{"a member outside the level", TopologyGroup{Required: []string{"b1", ""}}, true},
		{"slices whole", TopologyGroup{Required: []string{"b1", "b1", "b1", "b1"}, Slice: []string{"r1", "r1", "r2", "r2"}, SliceSize: 2}, false},
		{"a slice split", TopologyGroup{Required: []string{"b1", "b1", "b1", "b1"}, Slice: []string{"r1", "r1", "r1", "r2"}, SliceSize: 2}, true},
		{"nothing asked", TopologyGroup{}, false},
	} {
		if got := tc.g.Spread(); got != tc.want {
			t.Errorf("%s: Spread() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
