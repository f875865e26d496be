// Package simcluster starts the simulated clusters that `aisched sim`,
// `aisched whatif`, the console's simulations and the benchmarks place
// pods on, and observes their pods. Two engines run the same scheduler
// (the same plugins, the same configuration, kube-scheduler's own
// scheduling cycle) and the same simulated kubelets (package nodesim):
//
//   - APIServer is `aisched up`'s cluster: a real etcd, kube-apiserver and
//     controllers, in real time. It models everything a cluster does,
//     ResourceQuota admission and controllers included, at the speed of a
//     real control plane.
//   - Fast has no apiserver: client-go's fake clientset with the apiserver
//     behaviours the scheduler and the kubelets rely on (fakeAPI), and a
//     virtual clock (package vclock) that jumps from one event to the next
//     once the cluster is quiet, so that arrivals, run durations, backoffs
//     and Permit timeouts cost no wall time. Of admission it models
//     priority and, when asked (Options.ResourceQuotas), ResourceQuota
//     for pods with its controller's counting; it cannot model LimitRange,
//     webhooks or controllers (Jobs, Deployments, garbage collection):
//     runs that need them use APIServer.
//     StartSnapshot starts it from a copy of a live cluster's objects.
//
// A PodObserver (ObservePods) records what the runners above wait on and
// measure: when each pod was first bound, when it ended, and why the
// scheduler left it pending.
package simcluster
