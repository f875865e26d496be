package jobqueue

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aisched/aisched/pkg/topology"
)

const (
	blockLabel = "example.com/block"
	rackLabel  = "example.com/rack"
)

// racks is the topology of the tests: blocks of racks.
var racks = topology.OfLabels("racks", "topology racks", []string{blockLabel, rackLabel})

// rack returns n nodes of rack in block, of 4 cards each, with the cards
// free on each node in free (the last value repeats).
func rack(block, name string, n int, free ...int64) []Room {
	var out []Room
	for i := range n {
		f := free[min(i, len(free)-1)]
		r := room(fmt.Sprintf("%s-%d", name, i), 16, 4, 16, f)
		r.Node.Labels = map[string]string{blockLabel: block, rackLabel: name}
		out = append(out, r)
	}
	return out
}

// asks returns g asking for what c says.
func asks(g Group, c topology.Constraint) Group {
	c.RequiredKey, c.PreferredKey, c.SliceKey, c.TopologyKey = "annotation required", "annotation preferred", "annotation slice-level", "annotation topology"
	g.Constraint = c
	return g
}

// nodesOf returns the racks of the nodes a placement or reservation uses,
// with how many nodes of each.
func racksOf(rooms []Room, nodes []string) map[string]int {
	byName := map[string]string{}
	for _, r := range rooms {
		byName[r.Node.Name] = r.Node.Labels[rackLabel]
	}
	out := map[string]int{}
	for _, n := range nodes {
		out[byName[n]]++
	}
	return out
}

func TestTopologyPlacement(t *testing.T) {
	tests := []struct {
		name  string
		rooms []Room
		group Group
		// wantReason is the decision, wantMessage parts of its message,
		// wantDomain the Placed's selector (admitted), wantRacks how many
		// of the plan's nodes (Placing or Reservation) each rack holds.
		wantReason  Reason
		wantMessage []string
		wantDomain  string
		wantRacks   map[string]int
	}{{
		// r1 has 2 free nodes, r2 has 4: the 4 nodes it needs are in r2
		// only.
		name:       "fits only inside one rack",
		rooms:      slices.Concat(rack("b1", "r1", 4, 4, 4, 0), rack("b1", "r2", 4, 4)),
		group:      asks(group("g", 4, 1, 4, 0, 0), topology.Constraint{Required: rackLabel}),
		wantReason: ReasonAdmitted, wantDomain: "example.com/rack=r2", wantRacks: map[string]int{"r2": 4},
		wantMessage: []string{"inside rack r2"},
	}, {
		// Both racks hold 2 nodes of 4 cards; r1 is fuller (4 cards free
		// against 16): best fit over domains keeps r2 whole.
		name:       "a small gang goes to the fullest rack that holds it",
		rooms:      slices.Concat(rack("b1", "r1", 4, 4, 4, 0), rack("b1", "r2", 4, 4)),
		group:      asks(group("g", 2, 1, 4, 0, 0), topology.Constraint{Required: rackLabel}),
		wantReason: ReasonAdmitted, wantDomain: "example.com/rack=r1", wantRacks: map[string]int{"r1": 2},
	}, {
		// Two free nodes in each rack: without topology the gang spreads
		// over both; asking for one rack, it waits (next test).
		name:       "without topology the gang spreads",
		rooms:      slices.Concat(rack("b1", "r1", 4, 4, 4, 0), rack("b1", "r2", 4, 4, 4, 0)),
		group:      group("g", 4, 1, 4, 0, 0),
		wantReason: ReasonAdmitted, wantRacks: map[string]int{"r1": 2, "r2": 2},
	}, {
		name:        "with topology the same gang waits for one rack",
		rooms:       slices.Concat(rack("b1", "r1", 4, 4, 4, 0), rack("b1", "r2", 4, 4, 4, 0)),
		group:       asks(group("g", 4, 1, 4, 0, 0), topology.Constraint{Required: rackLabel}),
		wantReason:  ReasonWaitingForCapacity,
		wantMessage: []string{"no rack (example.com/rack) holds its 4 members: the best, rack r1, has room for 2"},
	}, {
		// No rack holds 6 nodes; block b1 (8 free nodes) does.
		name:       "preferred level falls back to the required one and says so",
		rooms:      slices.Concat(rack("b1", "r1", 4, 4), rack("b1", "r2", 4, 4), rack("b2", "r3", 4, 0)),
		group:      asks(group("g", 6, 1, 4, 0, 0), topology.Constraint{Required: blockLabel, Preferred: rackLabel}),
		wantReason: ReasonAdmitted, wantDomain: "example.com/block=b1", wantRacks: map[string]int{"r1": 4, "r2": 2},
		wantMessage: []string{"inside block b1", "no rack (example.com/rack) (preferred) holds it: the best, rack r1, holds 4 of its 6 members"},
	}, {
		// Racks of 18 nodes, 16 usable: slices of 16 go 16 + 16, where
		// best fit alone would fill one rack (18 + 14, next test).
		name: "slices are balanced",
		rooms: slices.Concat(rack("b1", "r1", 18, 0, 0, 4), rack("b1", "r2", 18, 0, 0, 4),
			rack("b1", "r3", 18, 4)),
		group: asks(group("g", 32, 1, 4, 0, 0), topology.Constraint{Required: blockLabel, SliceLevel: rackLabel, SliceSize: 16}),
		// r1 and r2 (16 free nodes each) are fuller than r3 (18).
		wantReason: ReasonAdmitted, wantDomain: "example.com/block=b1", wantRacks: map[string]int{"r1": 16, "r2": 16},
		wantMessage: []string{"slices of 16: 16 in rack r1, 16 in rack r2"},
	}, {
		name:       "without slices best fit fills a rack",
		rooms:      slices.Concat(rack("b1", "r1", 18, 4), rack("b1", "r2", 18, 4)),
		group:      asks(group("g", 32, 1, 4, 0, 0), topology.Constraint{Required: blockLabel}),
		wantReason: ReasonAdmitted, wantDomain: "example.com/block=b1", wantRacks: map[string]int{"r1": 18, "r2": 14},
	}, {
		// Every node has 2 of 4 cards busy: the gang waits, and its
		// reservation is the 4 nodes of one rack.
		name:        "the reservation is inside one rack",
		rooms:       slices.Concat(rack("b1", "r1", 4, 2), rack("b1", "r2", 4, 2)),
		group:       asks(group("g", 4, 1, 4, 0, 0), topology.Constraint{Required: rackLabel}),
		wantReason:  ReasonWaitingForCapacity,
		wantMessage: []string{"needs 4 pods placed at once inside one rack (example.com/rack)", "no rack (example.com/rack) holds its 4 members: the best, rack r1, has room for 0", "4 nodes of rack r1 are reserved"},
		wantRacks:   map[string]int{"r1": 4},
	}, {
		name:        "never fits a rack",
		rooms:       slices.Concat(rack("b1", "r1", 4, 4), rack("b1", "r2", 4, 4)),
		group:       asks(group("g", 6, 1, 4, 0, 0), topology.Constraint{Required: rackLabel}),
		wantReason:  ReasonUnplaceable,
		wantMessage: []string{"it never fits inside one rack (example.com/rack): with every node empty, no rack holds the 6 members it needs at once; the best, rack r1, holds 4"},
	}, {
		name:        "a level no topology has",
		rooms:       rack("b1", "r1", 4, 4),
		group:       asks(group("g", 2, 1, 4, 0, 0), topology.Constraint{Required: "example.com/rak"}),
		wantReason:  ReasonTopologyInvalid,
		wantMessage: []string{`annotation required="example.com/rak": no topology has the level "example.com/rak"; known levels: topology racks: example.com/block, example.com/rack`},
	}, {
		name:        "slices that do not divide the group",
		rooms:       rack("b1", "r1", 4, 4),
		group:       asks(group("g", 3, 1, 4, 0, 0), topology.Constraint{Required: blockLabel, SliceLevel: rackLabel, SliceSize: 2}),
		wantReason:  ReasonTopologyInvalid,
		wantMessage: []string{"annotation slice-level: slices of 2 do not divide the group's 3 members"},
	}, {
		// Only a preference: no rack holds 6, so it runs anywhere.
		name:       "a preference alone falls back to anywhere",
		rooms:      slices.Concat(rack("b1", "r1", 4, 4), rack("b2", "r2", 4, 4)),
		group:      asks(group("g", 6, 1, 4, 0, 0), topology.Constraint{Preferred: rackLabel}),
		wantReason: ReasonAdmitted, wantRacks: map[string]int{"r1": 4, "r2": 2},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := Compute(Input{Rooms: tc.rooms, Groups: []Group{tc.group}, Topologies: []*topology.Topology{racks}, Backfill: true})
			d := plan.Decisions["ns/g"]
			if d.Reason != tc.wantReason {
				t.Fatalf("decision %+v, want %s", d, tc.wantReason)
			}
			for _, part := range tc.wantMessage {
				if !strings.Contains(d.Message, part) {
					t.Errorf("message %q\nwant it to contain %q", d.Message, part)
				}
			}
			var domain string
			if p := plan.Placements["ns/g"]; p != nil {
				domain = p.Selector
			}
			if domain != tc.wantDomain {
				t.Errorf("domain %q, want %q", domain, tc.wantDomain)
			}
			if tc.wantRacks == nil {
				return
			}
			res := plan.Placing
			if res == nil {
				res = plan.Reservation
			}
			if res == nil {
				t.Fatal("no Placing and no Reservation")
			}
			got := racksOf(tc.rooms, slices.Collect(maps.Keys(res.Nodes)))
			if diff := cmp.Diff(tc.wantRacks, got); diff != "" {
				t.Errorf("nodes by rack (-want,+got):\n%s", diff)
			}
		})
	}
}

// A waiting gang's rack is reserved: a small gang behind it that fits
// only on the reserved nodes waits, and one that fits the other rack goes
// there rather than nibbling the reserved one.
func TestTopologyReservationNotNibbled(t *testing.T) {
	rooms := slices.Concat(rack("b1", "r1", 4, 2), rack("b1", "r2", 4, 2, 2, 2, 4))
	big := asks(group("big", 4, 1, 4, 0, 0), topology.Constraint{Required: rackLabel})
	small := asks(group("small", 2, 1, 2, 10, 0), topology.Constraint{Required: rackLabel})
	plan := Compute(Input{Rooms: rooms, Groups: []Group{big, small}, Topologies: []*topology.Topology{racks}, Backfill: true})
	if plan.Reservation == nil || plan.Reservation.Holder != "ns/big" {
		t.Fatalf("reservation %+v, want big's", plan.Reservation)
	}
	reserved := racksOf(rooms, slices.Collect(maps.Keys(plan.Reservation.Nodes)))
	// r2 has the most free (10 cards against 8): the shortest wait.
	if diff := cmp.Diff(map[string]int{"r2": 4}, reserved); diff != "" {
		t.Fatalf("reserved nodes by rack (-want,+got):\n%s", diff)
	}
	d := plan.Decisions["ns/small"]
	if !d.Admitted {
		t.Fatalf("small: %+v, want admitted in r1", d)
	}
	if p := plan.Placements["ns/small"]; p == nil || p.Selector != "example.com/rack=r1" {
		t.Fatalf("small placed in %+v, want rack r1 (r2 is reserved)", p)
	}
}

// An admitted group's members go on into the domain of the last plan.
func TestTopologyAdmittedKeepsDomain(t *testing.T) {
	rooms := slices.Concat(rack("b1", "r1", 4, 4), rack("b1", "r2", 4, 4))
	g := asks(group("g", 2, 1, 4, 0, 0), topology.Constraint{Required: rackLabel})
	first := Compute(Input{Rooms: rooms, Groups: []Group{g}, Topologies: []*topology.Topology{racks}})
	placed := first.Placements["ns/g"]
	if placed == nil {
		t.Fatal("not placed")
	}
	// Next pass: admitted; the other rack is now the fuller one.
	rooms2 := slices.Concat(rack("b1", "r1", 4, 4), rack("b1", "r2", 4, 4, 4, 4, 0))
	g.Admitted, g.Placed = true, placed
	second := Compute(Input{Rooms: rooms2, Groups: []Group{g}, Topologies: []*topology.Topology{racks}})
	if p := second.Placements["ns/g"]; p == nil || p.Selector != placed.Selector {
		t.Fatalf("second pass placed it in %+v, want %s", p, placed.Selector)
	}
	got := racksOf(rooms2, slices.Collect(maps.Keys(second.Placing.Nodes)))
	if diff := cmp.Diff(map[string]int{strings.TrimPrefix(placed.Words, "rack "): 2}, got); diff != "" {
		t.Errorf("placing nodes by rack (-want,+got):\n%s", diff)
	}
	if !strings.Contains(second.Decisions["ns/g"].Message, "inside "+placed.Words) {
		t.Errorf("message %q does not name the rack", second.Decisions["ns/g"].Message)
	}
}

// Preemption frees one rack: the gang that needs a whole rack preempts
// the two pods of r2 rather than one pod anywhere (which would leave it
// spread over both racks) or the three of r1.
func TestTopologyPreemptionFreesOneDomain(t *testing.T) {
	rooms := slices.Concat(rack("b1", "r1", 4, 4), rack("b1", "r2", 4, 4))
	for _, i := range []int{0, 1, 2, 4, 5} {
		bindOn(t, &rooms[i], pod(fmt.Sprintf("low-%s", rooms[i].Node.Name), 1, 4), 0)
	}
	high := asks(group("high", 4, 1, 4, 0, 10), topology.Constraint{Required: rackLabel})
	plan := Compute(Input{Rooms: rooms, Groups: []Group{high}, Topologies: []*topology.Topology{racks}})
	d := plan.Decisions["ns/high"]
	if d.Reason != ReasonPreempting || !strings.Contains(d.Message, "preempting pods of lower priority in rack r2") {
		t.Fatalf("decision %+v, want Preempting in rack r2", d)
	}
	if len(plan.Preemptions) != 1 {
		t.Fatalf("preemptions %+v, want one", plan.Preemptions)
	}
	if diff := cmp.Diff([]string{"low-r2-0", "low-r2-1"}, names(plan.Preemptions[0].Victims)); diff != "" {
		t.Errorf("victims (-want,+got):\n%s", diff)
	}
	reserved := racksOf(rooms, slices.Collect(maps.Keys(plan.Reservation.Nodes)))
	if diff := cmp.Diff(map[string]int{"r2": 4}, reserved); diff != "" {
		t.Errorf("reserved nodes by rack (-want,+got):\n%s", diff)
	}

	// Without topology one victim anywhere makes room.
	plain := high
	plain.Constraint = topology.Constraint{}
	plan = Compute(Input{Rooms: rooms, Groups: []Group{plain}, Topologies: []*topology.Topology{racks}})
	if len(plan.Preemptions) != 1 || len(plan.Preemptions[0].Victims) != 1 {
		t.Errorf("without topology: preemptions %+v, want one victim", plan.Preemptions)
	}
}

// FuzzTopology checks, on random racks and groups, that every group
// admitted into a domain is placed inside one domain of its required
// level, that its slices take whole multiples of the slice size adding up
// to its members, and that the plan does not depend on the input's order.
func FuzzTopology(f *testing.F) {
	f.Add([]byte{3, 4, 2, 1, 4, 3, 2, 1, 0, 2, 1, 3})
	f.Add([]byte{2, 6, 4, 0, 2, 2, 4, 4, 1, 2, 2, 1, 9, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := int(data[0])
			data = data[1:]
			return b
		}
		var rooms []Room
		for b := range 1 + next()%2 {
			for r := range 1 + next()%3 {
				rooms = append(rooms, rack(fmt.Sprintf("b%d", b), fmt.Sprintf("b%dr%d", b, r), 1+next()%4, int64(next()%5), int64(next()%5))...)
			}
		}
		levels := []string{"", blockLabel, rackLabel}
		var groups []Group
		for i := range 1 + next()%5 {
			g := group(fmt.Sprintf("g%d", i), 1+next()%6, 1, int64(1+next()%4), next()%3, 0)
			c := topology.Constraint{Required: levels[next()%3], Preferred: levels[next()%3]}
			if next()%3 == 0 && g.MinAvailable%2 == 0 {
				c.Required, c.SliceLevel, c.SliceSize = blockLabel, rackLabel, 2
			}
			groups = append(groups, asks(g, c))
		}
		in := Input{Groups: groups, Rooms: rooms, Topologies: []*topology.Topology{racks}, Backfill: true}
		plan := Compute(in)
		domainOf := map[string]map[string]string{}
		for _, r := range rooms {
			domainOf[r.Node.Name] = r.Node.Labels
		}
		for _, g := range groups {
			d := plan.Decisions[g.Key]
			p := plan.Placements[g.Key]
			if !d.Admitted || g.Constraint.Empty() || d.Reason == ReasonTopologyInvalid {
				continue
			}
			if g.Constraint.Required != "" && p == nil {
				t.Fatalf("%s admitted with a required level and no domain: %+v", g.Key, d)
			}
			if p == nil {
				continue
			}
			if g.Constraint.Required != "" {
				seen := map[string]bool{}
				for node := range p.Nodes {
					seen[domainOf[node][g.Constraint.Required]] = true
				}
				if len(seen) != 1 {
					t.Errorf("%s asks for one %s, placed in %v", g.Key, g.Constraint.Required, seen)
				}
			}
			if g.Constraint.SliceSize > 0 {
				sum := 0
				for _, s := range p.Slices {
					if s.Members%g.Constraint.SliceSize != 0 {
						t.Errorf("%s: slice domain %s takes %d members, not a multiple of %d", g.Key, s.Domain, s.Members, g.Constraint.SliceSize)
					}
					sum += s.Members
				}
				if sum != g.MinAvailable {
					t.Errorf("%s: slices take %d members, want %d", g.Key, sum, g.MinAvailable)
				}
			}
		}
		reversed := slices.Clone(groups)
		slices.Reverse(reversed)
		in.Groups = reversed
		if again := Compute(in); !cmp.Equal(again.Decisions, plan.Decisions) {
			t.Errorf("plan depends on the order of groups:\n%v\n%v", plan.Decisions, again.Decisions)
		}
	})
}
