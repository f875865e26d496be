// Package sim runs scenarios (package scenario) on the embedded control
// plane: for each policy and seed a fresh simulated cluster, the real
// scheduler with the policy's configuration, the workload created at its
// arrival times, and the placement measured at the end (package metrics).
// Nothing of scheduling is reimplemented here.
package sim
