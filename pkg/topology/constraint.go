package topology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/util/quote"
)

// Constraint is what a pod group asks of a topology, in the one model.
// Levels are named by their keys (Level.Key); "" asks nothing of that kind.
type Constraint struct {
	// Topology names the topology; "" for the one that has the levels.
	Topology string
	// Required is the level inside one domain of which every member runs.
	// A peer's form that names several levels (Koordinator's MustGather
	// layers) joins them with commas: the finest binds.
	Required string
	// Preferred is the level tried first; then each coarser level, up to
	// Required (or the whole cluster without it). Several, comma-joined:
	// the finest is tried first.
	Preferred string
	// PreferFinest prefers the topology's finest level (Volcano's
	// networkTopology, which tries the lowest tier first).
	PreferFinest bool
	// SliceLevel and SliceSize: every SliceSize members inside one domain
	// of SliceLevel, a level finer than Required.
	SliceLevel string
	SliceSize  int
	// The keys each field was read from ("annotation
	// topology.aisched.io/required"), so that a refusal names the key.
	TopologyKey, RequiredKey, PreferredKey, SliceKey string
}

// Empty reports whether c asks nothing.
func (c Constraint) Empty() bool {
	return c.Required == "" && c.Preferred == "" && c.SliceLevel == "" && !c.PreferFinest
}

// MaxSliceSize bounds a slice's members, as min-available is bounded.
const MaxSliceSize = 10000

// Resolved is a constraint with its topology and level indexes; -1 for a
// level not asked.
type Resolved struct {
	Topology *Topology
	// Required, Preferred and Slice are level indexes.
	Required, Preferred, Slice int
	SliceSize                  int
	Constraint                 Constraint
}

// Levels returns the levels to try, finest first: Preferred (or Required
// without it) up to Required, or up to the coarsest level when nothing is
// required. Empty when the constraint names slices alone.
func (r *Resolved) Levels() []int {
	first := r.Preferred
	if first < 0 {
		first = r.Required
	}
	last := max(r.Required, 0)
	var out []int
	for i := first; i >= last && i >= 0; i-- {
		out = append(out, i)
	}
	return out
}

// Resolve finds c's topology among tops and the indexes of its levels. An
// error names the key whose value cannot be honoured.
func Resolve(c Constraint, tops []*Topology) (*Resolved, error) {
	candidates := tops
	if c.Topology != "" {
		candidates = nil
		for _, t := range tops {
			if t.Name == c.Topology {
				candidates = append(candidates, t)
			}
		}
		if len(candidates) == 0 {
			return nil, fmt.Errorf("%s=%s: there is no topology %s%s", c.TopologyKey, quote.Value(c.Topology), quote.Value(c.Topology), known(tops))
		}
	}
	var asked []struct{ key, level string }
	for _, l := range []struct{ key, level string }{{c.RequiredKey, c.Required}, {c.PreferredKey, c.Preferred}, {c.SliceKey, c.SliceLevel}} {
		for _, level := range strings.Split(l.level, ",") {
			if level != "" {
				asked = append(asked, struct{ key, level string }{l.key, level})
			}
		}
	}
	var t *Topology
	for _, cand := range candidates {
		if !slices.ContainsFunc(asked, func(l struct{ key, level string }) bool { return cand.Level(l.level) < 0 }) {
			t = cand
			break
		}
	}
	if t == nil {
		// Name the first level no candidate has.
		for _, l := range asked {
			if !slices.ContainsFunc(candidates, func(t *Topology) bool { return t.Level(l.level) >= 0 }) {
				return nil, fmt.Errorf("%s=%s: no topology has the level %s%s", l.key, quote.Value(l.level), quote.Value(l.level), known(candidates))
			}
		}
		return nil, fmt.Errorf("%s: no one topology has all of the levels %s%s", c.RequiredKey, levelList(asked), known(candidates))
	}
	r := &Resolved{Topology: t, Required: finest(t, c.Required), Preferred: finest(t, c.Preferred), Slice: finest(t, c.SliceLevel), SliceSize: c.SliceSize, Constraint: c}
	if c.PreferFinest && r.Preferred < 0 {
		r.Preferred = len(t.Levels) - 1
		if r.Preferred < r.Required {
			r.Preferred = r.Required
		}
	}
	switch {
	case r.Preferred >= 0 && r.Required >= 0 && r.Preferred < r.Required:
		return nil, fmt.Errorf("%s=%s: level %s is coarser than the required %s (%s); prefer a finer level or the same",
			c.PreferredKey, quote.Value(c.Preferred), quote.Value(c.Preferred), quote.Value(c.Required), c.RequiredKey)
	case r.Slice >= 0 && r.Slice <= max(r.Required, r.Preferred):
		return nil, fmt.Errorf("%s=%s: a slice's level must be finer than the group's (%s)", c.SliceKey, quote.Value(c.SliceLevel),
			quote.Value(t.Levels[max(r.Required, r.Preferred)].Key))
	}
	return r, nil
}

// finest returns the index of the finest of the comma-joined levels of t,
// -1 for none.
func finest(t *Topology, levels string) int {
	out := -1
	for _, l := range strings.Split(levels, ",") {
		if l != "" {
			out = max(out, t.Level(l))
		}
	}
	return out
}

// known lists the topologies and their levels for an error.
func known(tops []*Topology) string {
	if len(tops) == 0 {
		return "; there are no topologies (create an aischedtopology)"
	}
	parts := make([]string, 0, min(len(tops), 4))
	for _, t := range tops[:min(len(tops), 4)] {
		keys := make([]string, len(t.Levels))
		for i, l := range t.Levels {
			keys[i] = l.Key
		}
		parts = append(parts, fmt.Sprintf("%s: %s", t.Object, strings.Join(keys, ", ")))
	}
	if len(tops) > 4 {
		parts = append(parts, fmt.Sprintf("and %d more", len(tops)-4))
	}
	return "; known levels: " + strings.Join(parts, "; ")
}

func levelList(ls []struct{ key, level string }) string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = quote.Value(l.level)
	}
	return strings.Join(out, ", ")
}

// ofAisched reads aisched's own keys (topology.aisched.io/*) from a pod's
// or a PodGroup's annotations; where says which ("annotation" or
// "PodGroup annotation"). ok is false when none is set.
func ofAisched(annotations map[string]string, where string) (c Constraint, ok bool, err error) {
	key := func(k string) string { return where + " " + k }
	get := func(k string) (string, bool) {
		v, ok := annotations[k]
		return strings.TrimSpace(v), ok
	}
	topo, hasTopo := get(aischedv1alpha1.TopologyKey)
	req, hasReq := get(aischedv1alpha1.TopologyRequiredKey)
	pref, hasPref := get(aischedv1alpha1.TopologyPreferredKey)
	sliceLevel, hasSliceLevel := get(aischedv1alpha1.TopologySliceLevelKey)
	sliceSize, hasSliceSize := get(aischedv1alpha1.TopologySliceSizeKey)
	if !hasTopo && !hasReq && !hasPref && !hasSliceLevel && !hasSliceSize {
		return Constraint{}, false, nil
	}
	c = Constraint{Topology: topo, Required: req, Preferred: pref, SliceLevel: sliceLevel,
		TopologyKey: key(aischedv1alpha1.TopologyKey), RequiredKey: key(aischedv1alpha1.TopologyRequiredKey),
		PreferredKey: key(aischedv1alpha1.TopologyPreferredKey), SliceKey: key(aischedv1alpha1.TopologySliceLevelKey)}
	for _, l := range []struct{ k, v string }{{aischedv1alpha1.TopologyRequiredKey, req}, {aischedv1alpha1.TopologyPreferredKey, pref}, {aischedv1alpha1.TopologySliceLevelKey, sliceLevel}} {
		if _, set := annotations[l.k]; set {
			if err := checkLevel(key(l.k), l.v); err != nil {
				return Constraint{}, true, err
			}
		}
	}
	if hasTopo {
		if msgs := validation.IsDNS1123Subdomain(topo); len(msgs) > 0 {
			return Constraint{}, true, fmt.Errorf("%s=%s: %s", key(aischedv1alpha1.TopologyKey), quote.Value(topo), msgs[0])
		}
	}
	switch {
	case hasSliceLevel != hasSliceSize:
		return Constraint{}, true, fmt.Errorf("%s and %s go together: give both or neither", key(aischedv1alpha1.TopologySliceLevelKey), key(aischedv1alpha1.TopologySliceSizeKey))
	case hasSliceSize:
		n, err := sliceSizeOf(key(aischedv1alpha1.TopologySliceSizeKey), sliceSize)
		if err != nil {
			return Constraint{}, true, err
		}
		c.SliceSize = n
	}
	if c.Empty() {
		return Constraint{}, true, fmt.Errorf("%s=%s names a topology but no level: add %s or %s", key(aischedv1alpha1.TopologyKey), quote.Value(topo),
			aischedv1alpha1.TopologyRequiredKey, aischedv1alpha1.TopologyPreferredKey)
	}
	return c, true, nil
}

// checkLevel checks that v can name a level: a node label key.
func checkLevel(key, v string) error {
	if msgs := validation.IsQualifiedName(v); len(msgs) > 0 {
		return fmt.Errorf("%s=%s: want a level's node label, such as example.com/rack: %s", key, quote.Value(v), msgs[0])
	}
	return nil
}

// sliceSizeOf reads a slice size.
func sliceSizeOf(key, v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > MaxSliceSize {
		return 0, fmt.Errorf("%s=%s: want a whole number of members from 1 to %d", key, quote.Value(v), MaxSliceSize)
	}
	return n, nil
}
