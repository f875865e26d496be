# Shared by run.sh (make test-node: one real node in the host's network)
# and e2e.sh (make test-e2e: three real nodes, each in its own network and
# mount namespaces): the node's binaries built from their Go modules, the
# configurations of containerd and the kubelet, starting them and stopping
# what they ran. Source it after setting repo, work and bin.

log() { echo "${log_prefix:-node-e2e}: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
expect() { # what got want
  [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
  log "ok: $1 = $3"
}

# need_root_and_runc: what every real node needs on this machine.
need_root_and_runc() {
  [ "$(id -u)" = 0 ] || fail "needs root (containerd and runc)"
  command -v runc >/dev/null || fail "needs runc on PATH (apt-get install runc)"
}

# build_node: containerd, its runc shim and ctr (containerd's Go module),
# the kubelet (k8s.io/kubernetes; with kube-proxy when $1 is kube-proxy),
# the host's aisched, the fake GPUs (fakegpu) and the images of the probe
# (pause and probe).
build_node() {
  log "building containerd, its runc shim and ctr (containerd's Go module), the kubelet${1:+ and $1} (k8s.io/kubernetes), aisched, the fake GPUs, the probe image"
  (cd "$repo/hack/node-e2e" && go build -o "$bin/" github.com/containerd/containerd/v2/cmd/containerd \
    github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr)
  # The kubelet's packages need modules aisched's go.mod does not list:
  # build it with a copy of go.mod, which leaves the repository's alone.
  cp "$repo/go.mod" "$work/kube.mod"
  cp "$repo/go.sum" "$work/kube.sum"
  local cmds=(k8s.io/kubernetes/cmd/kubelet)
  [ -z "${1:-}" ] || cmds+=("k8s.io/kubernetes/cmd/$1")
  # The Kubernetes version they report, as make stamps it (KUBE_LDFLAGS):
  # the chart's kubeVersion reads the apiserver's.
  local v ldflags pkg
  v=$(cd "$repo" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$(echo "$v" | cut -d. -f1 | tr -d v) -X $pkg.gitMinor=$(echo "$v" | cut -d. -f2) -X $pkg.gitTreeState=clean"
  done
  (cd "$repo" && go build -mod=mod -modfile="$work/kube.mod" -ldflags "$ldflags" -o "$bin/" "${cmds[@]}" &&
    go build -ldflags "$ldflags" -o "$bin/aisched" ./cmd/aisched)
  (cd "$repo/hack/node-e2e" && CGO_ENABLED=0 go build -o "$bin/probe" ./probe && CGO_ENABLED=0 go build -o "$bin/fakegpu" ./fakegpu &&
    go run ./mkimage -binary "$bin/probe" -out "$work/probe.tar" aisched.io/e2e/probe:1 &&
    go run ./mkimage -binary "$bin/probe" -out "$work/pause.tar" -entrypoint "/probe pause" registry.k8s.io/pause:3.10.1)
}

# containerd_config FILE DIR [CNI_CONF_DIR RUNTIME]: containerd with its
# state under DIR, its socket DIR/containerd.sock, NRI on at
# $nri_socket, the probe's pause image as the sandbox image; with a CNI
# configuration directory (the plugins in $bin) and the runc binary the
# shim runs (RUNTIME, a wrapper such as NVIDIA's runtime) when given.
containerd_config() {
  local cni=""
  if [ -n "${3:-}" ]; then
    cni="
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['$bin']
  conf_dir = '$3'"
  fi
  cat > "$1" <<TOML
version = 3
root = "$2/root"
state = "$2/state"
[grpc]
  address = "$2/containerd.sock"
[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = "$nri_socket"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "registry.k8s.io/pause:3.10.1"
[plugins.'io.containerd.cri.v1.runtime']
  # Machines without CAP_SYS_RESOURCE (this one) cannot give sandboxes the
  # kubelet's negative OOM score.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = "${4:-}"$cni
TOML
}

# kubelet_config FILE DIR ADDRESS PORT ANONYMOUS: a kubelet on the
# containerd of DIR, serving on ADDRESS:PORT; ANONYMOUS true lets the
# apiserver (which has no kubelet client certificate) reach logs, exec and
# port-forward. No cgroups of its own, no eviction, no image GC: it shares
# this machine with other kubelets and with everything else.
kubelet_config() {
  cat > "$1" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $3
port: $4
readOnlyPort: 0
healthzPort: 0
authentication: {anonymous: {enabled: $5}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: $2/pod-logs
containerRuntimeEndpoint: unix://$2/containerd.sock
localStorageCapacityIsolation: false
YAML
}

# wait_containerd SOCKET LOG PID: until containerd answers on SOCKET.
wait_containerd() {
  for _ in $(seq 60); do
    [ -S "$1" ] && "$bin/ctr" -a "$1" version >/dev/null 2>&1 && return
    kill -0 "$3" 2>/dev/null || break
    sleep 0.5
  done
  fail "containerd did not start: $(tail -3 "$2")"
}

# stop_tasks SOCKET: kills the containers of the containerd at SOCKET
# (containerd_config's: its state beside the socket) and deletes them and
# their pods' sandboxes, so that their shims exit. What is left of them
# (their cgroups' processes, their shims), also when that containerd is
# gone, is ended by process id.
stop_tasks() {
  local c t p ids
  ids=$({ "$bin/ctr" -a "$1" -n k8s.io containers ls -q 2>/dev/null; ls "$(dirname "$1")/state/io.containerd.runtime.v2.task/k8s.io" 2>/dev/null; } | sort -u)
  for t in $("$bin/ctr" -a "$1" -n k8s.io tasks ls -q 2>/dev/null); do
    "$bin/ctr" -a "$1" -n k8s.io tasks kill -s KILL "$t" 2>/dev/null || true
  done
  sleep 1
  for c in $("$bin/ctr" -a "$1" -n k8s.io containers ls -q 2>/dev/null); do
    "$bin/ctr" -a "$1" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
    "$bin/ctr" -a "$1" -n k8s.io containers delete "$c" >/dev/null 2>&1 || true
  done
  for c in $("$bin/ctr" -a "$1" -n k8s.io sandboxes ls 2>/dev/null | awk 'NR > 1 {print $1}'); do
    "$bin/ctr" -a "$1" -n k8s.io sandboxes rm -f "$c" >/dev/null 2>&1 || true
  done
  for c in $ids; do stop_cgroup "k8s.io/$c"; done
  # containerd's parent of its containers' cgroups, once empty.
  for c in /sys/fs/cgroup/*/k8s.io; do [ -d "$c" ] && rmdir "$c" 2>/dev/null; done
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/exe" 2>/dev/null)" = "$bin/containerd-shim-runc-v2" ] &&
      tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q -- "-address $1 " && stop_pid "${p#/proc/}"
  done
  return 0
}

# stop_cgroup NAME: ends the processes of a container's cgroup NAME (in
# every hierarchy), by process id, and removes the cgroup.
stop_cgroup() {
  local p dir
  for p in $(cat /sys/fs/cgroup/*/"$1"/cgroup.procs 2>/dev/null | sort -u); do
    stop_pid "$p"
  done
  for dir in /sys/fs/cgroup/*/"$1"; do
    [ -d "$dir" ] && rmdir "$dir" 2>/dev/null
  done
  return 0
}

# stop_pid PID: ends a process this script started and waits for it.
stop_pid() {
  [ -n "${1:-}" ] || return 0
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$1" 2>/dev/null || true
}
