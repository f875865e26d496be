// Package queuetree is the one model of team queues: aisched's Queues,
// and Volcano's and KAI-Scheduler's translated into it, as a tree with
// each queue's guarantee, limit, lending limit and weight per resource,
// the cluster's capacity, and what each queue's work uses and waits for.
// From these it answers what the job queue asks while it admits work:
// whether work stays within its queues' guarantees (Within, Claims),
// passes a limit (OverLimit), which of two borrowing works goes first
// (Before: dominant-resource shares, weighted, at their lowest common
// ancestor), whether running work may be taken back (Reclaimable), and
// every queue's fair share (FairShares). It is pure: the job queue builds
// a Tree for each pass.
package queuetree
