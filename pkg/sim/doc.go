// Package sim runs scenarios (package scenario) on simulated clusters
// (package simcluster): for each policy and seed a fresh cluster, the real
// scheduler with the policy's configuration, the workload created at its
// arrival times, and the placement measured at the end (package metrics)
// from what the cluster's pod observer saw. Trace scenarios are replayed
// with the FGD paper's protocol (Replay). Nothing of scheduling is
// reimplemented here.
package sim
