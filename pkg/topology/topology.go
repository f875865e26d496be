package topology

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Topology is one topology of the model.
type Topology struct {
	// Name is how a constraint names it: an aisched Topology's name, or a
	// peer's with its prefix ("kueue/default", "kai/cluster-topology",
	// "koordinator/default", "volcano").
	Name string
	// Object names it in messages ("topology racks", "KAI Topology
	// cluster-topology").
	Object string
	// Levels are its levels, coarsest first.
	Levels []Level
	// members are, for a topology of members (Volcano's HyperNodes), each
	// node's domain at each level ("" outside it); nil for a topology of
	// node labels.
	members map[string][]string
}

// Level is one level of a topology.
type Level struct {
	// Key is what constraints name the level by: its node label, or for a
	// topology of members its own name (a Volcano tier "2").
	Key string
	// Label is the node label the level reads; "" in a topology of
	// members.
	Label string
	// Name is a short word for the level in messages ("rack").
	Name string
	// Alias is another name constraints may give the level (a KAI level's
	// alias, a Volcano tier's tierName); "" for none.
	Alias string
}

// MaxLevels bounds a topology's levels, as the Topology CRD does.
const MaxLevels = 8

// OfLabels returns a topology whose levels are node labels, coarsest
// first.
func OfLabels(name, object string, labels []string) *Topology {
	t := &Topology{Name: name, Object: object}
	for _, l := range labels {
		t.Levels = append(t.Levels, Level{Key: l, Label: l, Name: shortName(l)})
	}
	return t
}

// OfMembers returns a topology whose domains are named by membership:
// members[node][i] is the node's domain at level i, "" when it is outside
// the level.
func OfMembers(name, object string, levels []Level, members map[string][]string) *Topology {
	if members == nil {
		members = map[string][]string{}
	}
	return &Topology{Name: name, Object: object, Levels: levels, members: members}
}

// shortName is the last part of a label key: example.com/rack is "rack".
func shortName(label string) string {
	return label[strings.LastIndexByte(label, '/')+1:]
}

// Level returns the index of the level with key, -1 when the topology has
// none.
func (t *Topology) Level(key string) int {
	for i, l := range t.Levels {
		if l.Key == key || l.Alias != "" && l.Alias == key {
			return i
		}
	}
	return -1
}

// Domain returns the domain of node at level i, and false when the node is
// outside the level. A domain of a topology of labels is named by the
// values of level i and every coarser level the node has, so that racks
// named alike in two blocks are two domains.
func (t *Topology) Domain(node *corev1.Node, i int) (string, bool) {
	if t.members != nil {
		ds := t.members[node.Name]
		if i < len(ds) && ds[i] != "" {
			return ds[i], true
		}
		return "", false
	}
	v, ok := node.Labels[t.Levels[i].Label]
	if !ok {
		return "", false
	}
	if i == 0 {
		return v, true
	}
	var b strings.Builder
	for j := range i {
		b.WriteString(node.Labels[t.Levels[j].Label])
		b.WriteByte('/')
	}
	b.WriteString(v)
	return b.String(), true
}

// value is the last part of a domain's name: its own level's value.
func value(domain string) string {
	return domain[strings.LastIndexByte(domain, '/')+1:]
}

// Words names a domain of level i in messages: "rack r3", or for a
// topology of members "HyperNode s0 (tier 1)".
func (t *Topology) Words(i int, domain string) string {
	if t.members != nil {
		return "HyperNode " + domain + " (" + t.Levels[i].Name + ")"
	}
	return t.Levels[i].Name + " " + value(domain)
}

// Selector names a domain of level i as a status shows it: the level's
// node label and the value, "example.com/rack=r3"; for a topology of
// members, the level's key and the member, "tier 1=s0".
func (t *Topology) Selector(i int, domain string) string {
	return t.Levels[i].Key + "=" + value(domain)
}

// LevelWords names level i in messages: its short name, then its key when
// they differ ("rack (example.com/rack)").
func (t *Topology) LevelWords(i int) string {
	l := t.Levels[i]
	if l.Name == l.Key {
		return l.Name
	}
	return l.Name + " (" + l.Key + ")"
}
