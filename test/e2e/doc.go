// Package e2e is the suite of `make test-e2e`: the Helm chart installed
// on a cluster of real nodes (containerd, runc, kubelets, kube-proxy, a
// CNI pod network; hack/node-e2e/e2e.sh brings it up on one machine),
// checked step by step as a user would, then upgraded and uninstalled.
// Without such a cluster (AISCHED_E2E_KUBECONFIG unset) it skips.
package e2e
