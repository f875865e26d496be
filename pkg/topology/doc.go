// Package topology is aisched's one model of where nodes sit in the
// network and of what a pod group asks of it (docs/topology.md).
//
// A Topology has levels, coarsest first (a block, a rack, an NVLink
// clique, a host); a domain of a level is the nodes that share its node
// label's value, and a node without the label is outside the level.
// Volcano's HyperNodes, a tree of named members rather than labels, are a
// Topology too: a node's domain at a tier is the HyperNode of that tier
// that holds it. A Constraint is what a group asks: a required level (all
// members inside one domain of it), a preferred level (tried first, then
// each coarser level up to the required one) and slices (every k members
// inside one domain of a finer level). Resolve checks a Constraint against
// the topologies and finds its levels.
//
// aisched's own keys (topology.aisched.io/*) and each peer's form (Kueue's
// and KAI-Scheduler's annotations, Volcano's networkTopology, Koordinator's
// gather strategy) are translated into a Constraint here, at the edge, one
// translator per form (peers.go); the job queue places by the model alone.
// Source follows the Topology objects of every form.
package topology
