//go:build tools

// Package tools pins the binaries the node end-to-end tests build from
// their Go modules: containerd, its runc shim and ctr, and the CNI plugins
// of the e2e cluster's pod network (bridge, host-local, loopback).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
)
