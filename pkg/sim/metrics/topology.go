package metrics

// TopologyGroup is a gang that asked for topology domains, as it was
// placed: for each bound member, its domain at the group's required level,
// at its preferred level and at its slice level ("" for a node outside the
// level). A level the group does not ask for is nil.
type TopologyGroup struct {
	Required, Preferred, Slice []string
	// SliceSize is the members of a slice.
	SliceSize int
}

// TopologyResult are the topology metrics of a run; each nil when no
// group asks for what it measures.
type TopologyResult struct {
	// RequiredShare is the share of the groups with a required level whose
	// members are all inside one domain of it (1 when every constraint
	// held).
	RequiredShare *float64
	// PreferredShare is the share of the groups with a preferred level
	// whose members are all inside one domain of it.
	PreferredShare *float64
	// DomainsSpanned is the mean number of domains a group's members
	// span, at its preferred level (its required one without): 1 is a
	// group inside one domain.
	DomainsSpanned *float64
	// SlicesWhole is the share of the groups in slices whose every domain
	// of the slice level holds a whole number of slices.
	SlicesWhole *float64
}

// Topology computes the topology metrics of the groups.
func Topology(groups []TopologyGroup) TopologyResult {
	var required, inRequired, preferred, inPreferred, spread, spanned, sliced, whole int
	for _, g := range groups {
		if g.Required != nil {
			required++
			if inOne(g.Required) {
				inRequired++
			}
		}
		if g.Preferred != nil {
			preferred++
			if inOne(g.Preferred) {
				inPreferred++
			}
		}
		if level := g.Preferred; level != nil || g.Required != nil {
			if level == nil {
				level = g.Required
			}
			spread++
			spanned += distinct(level)
		}
		if g.Slice != nil && g.SliceSize > 0 {
			sliced++
			if slicesWhole(g.Slice, g.SliceSize) {
				whole++
			}
		}
	}
	return TopologyResult{RequiredShare: share(inRequired, required), PreferredShare: share(inPreferred, preferred),
		DomainsSpanned: share(spanned, spread), SlicesWhole: share(whole, sliced)}
}

// Spread reports whether the group is not as it asked: its members span
// several domains of its preferred level (its required one without), or
// a domain of its slice level holds part of a slice.
func (g TopologyGroup) Spread() bool {
	level := g.Preferred
	if level == nil {
		level = g.Required
	}
	if level != nil && !inOne(level) {
		return true
	}
	return g.Slice != nil && g.SliceSize > 0 && !slicesWhole(g.Slice, g.SliceSize)
}

// inOne reports whether every member is in one domain (not outside the
// level).
func inOne(domains []string) bool {
	return len(domains) > 0 && domains[0] != "" && distinct(domains) == 1
}

// distinct counts the domains of the members; members outside the level
// count as one more.
func distinct(domains []string) int {
	seen := map[string]bool{}
	for _, d := range domains {
		seen[d] = true
	}
	return len(seen)
}

// slicesWhole reports whether each domain holds a multiple of size
// members.
func slicesWhole(domains []string, size int) bool {
	count := map[string]int{}
	for _, d := range domains {
		count[d]++
	}
	for d, n := range count {
		if d == "" || n%size != 0 {
			return false
		}
	}
	return true
}

// share is n/of, nil when of is 0.
func share(n, of int) *float64 {
	if of == 0 {
		return nil
	}
	v := float64(n) / float64(of)
	return &v
}
