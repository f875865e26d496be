// Package integration holds the tests that run against the embedded
// control plane: a real etcd and kube-apiserver, the real scheduler with
// aisched's plugins, the upstream controllers and simulated nodes.
//
// The test binary doubles as the aisched binary (see TestMain), so that
// command-line behaviour (signals, output, exit codes) is tested on the
// real command without a separate build.
package integration
