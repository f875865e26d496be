// Package agent is the node agent, `aisched agent`: a DaemonSet pod that
// measures its node and publishes the result for the scheduler.
//
// At each interval the agent reads the node twice, a window apart
// (pkg/agent/collect), and publishes the utilisation over that window, the
// node's performance and the load of its NVIDIA GPUs (pkg/agent/nvidiasmi)
// as the status of the node's NodeMetrics; when nvidia-smi is there, it also
// keeps the node's GPUInventory up to date. Both objects are named after the
// node and, when the agent may read the Node, owned by it, so that deleting
// a node deletes them.
//
// A failed publish is retried with a fresh sample after an exponential
// backoff rather than at the interval, so that the agents of a large
// cluster do not hammer an apiserver that is down. The agent serves its own
// Prometheus metrics and a /healthz that fails when it has not published
// for three intervals (see Agent.Handler).
//
// With delivery on (Agent.StartDelivery), the agent also runs the NRI hook
// of pkg/agent/deliver, which gives each container of an aisched-placed
// pod its cards, and its drift checker, on an informer of the node's pods.
package agent
