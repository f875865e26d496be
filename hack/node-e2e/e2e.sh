#!/usr/bin/env bash
# make test-e2e: the Helm chart on a cluster of real nodes on this machine.
#
# The control plane is `aisched up --advertise-address` (etcd, the
# apiserver, the controllers; no simulated node, no aisched scheduler and
# no platform of its own: the chart brings those). Three nodes, each in its
# own network and mount namespaces: containerd (NRI on) with runc, a
# kubelet with a node's credentials, kube-proxy (iptables), and a pod
# network of the CNI bridge plugin (host-local addresses, a /24 per node,
# routes between the nodes through a bridge on the host). Two nodes have
# fake GPUs (lib.sh, fakegpu): nvidia-smi for the agent and the containers,
# a stand-in of NVIDIA's container runtime that mounts it, and a device
# plugin on the kubelet's device-plugin API. Every binary is built from the
# repository's pinned Go modules; runc and iptables are Debian's.
#
# Then the suite (test/e2e) installs the chart with the release image of
# `make image` (imported into each node's containerd, pinned by digest),
# checks it step by step, upgrades it to a second build of the image and
# uninstalls it. Everything this script starts, mounts and creates is
# removed at the end, also when it fails. Needs root, runc, iptables and
# Go; E2E_KEEP=1 keeps the cluster up after the suite (ended with
# `hack/node-e2e/e2e.sh down`).
set -euo pipefail
cd "$(dirname "$0")"
repo=$(cd ../.. && pwd)
work=${E2E_DIR:-/tmp/aisched-e2e}
bin=$work/bin
log_prefix=e2e
# Inside each node's mount namespace, where the chart's agent looks.
nri_socket=/var/run/nri/nri.sock
. ./lib.sh

nodes=(node-1 node-2 node-3)
gpu_nodes=(node-1 node-2)
bridge=ase2e0
host_ip=10.250.0.1
node_ip() { echo "10.250.0.1${1#node-}"; }
pod_cidr() { echo "10.251.${1#node-}.0/24"; }
netns() { echo "aisched-e2e-${1#node-}"; }
# on_node NODE CMD...: runs CMD in the node's network and mount namespaces.
on_node() { local n=$1; shift; nsenter --net="/run/netns/$(netns "$n")" --mount="$work/ns/$n" "$@"; }
# start NODE NAME CMD...: starts CMD in the node's namespaces in the
# background (nsenter execs it: the pid is CMD's), logging to
# $work/NODE/NAME.log, its pid in $work/NODE/NAME.pid.
start() {
  local n=$1 name=$2
  shift 2
  nsenter --net="/run/netns/$(netns "$n")" --mount="$work/ns/$n" "$@" >> "$work/$n/$name.log" 2>&1 &
  echo $! > "$work/$n/$name.pid"
}

# down: stops and removes everything of a run, whatever it got to; safe
# to call twice.
down() {
  set +e
  local n p
  for n in "${nodes[@]}"; do
    for p in device-plugin kube-proxy kubelet; do stop_pid "$(cat "$work/$n/$p.pid" 2>/dev/null)"; done
    stop_tasks "$work/$n/containerd/containerd.sock"
    stop_pid "$(cat "$work/$n/containerd.pid" 2>/dev/null)"
    # What is left in the node's namespaces was started by this run: end
    # it by process id.
    for p in $(ns_pids "/run/netns/$(netns "$n")" net) $(ns_pids "$work/ns/$n" mnt); do stop_pid "$p"; done
    if mountpoint -q "$work/ns/$n" 2>/dev/null; then umount "$work/ns/$n"; fi
    ip netns del "$(netns "$n")" 2>/dev/null
    ip route del "$(pod_cidr "$n")" 2>/dev/null
  done
  stop_pid "$(cat "$work/up.pid" 2>/dev/null)"
  # Anything else still running one of this run's binaries.
  for p in /proc/[0-9]*; do
    case $(readlink "$p/exe" 2>/dev/null) in "$bin"/*) stop_pid "${p#/proc/}" ;; esac
  done
  if mountpoint -q "$work/ns" 2>/dev/null; then umount "$work/ns"; fi
  ip link del "$bridge" 2>/dev/null
  [ -f "$work/ip_forward" ] && sysctl -qw net.ipv4.ip_forward="$(cat "$work/ip_forward")" && rm -f "$work/ip_forward"
  rm -f "$work"/*.pid "$work"/*/*.pid
  rmdir /run/nri /run/aisched-fake-gpu /var/lib/kubelet 2>/dev/null
  set -e
}

# ns_pids FILE KIND: the processes whose KIND (net, mnt) namespace is the
# one bound at FILE.
ns_pids() {
  local ino p
  ino=$(stat -L -c %i "$1" 2>/dev/null) || return 0
  for p in /proc/[0-9]*; do
    [ "$(stat -L -c %i "$p/ns/$2" 2>/dev/null)" = "$ino" ] && [ "${p#/proc/}" != $$ ] && echo "${p#/proc/}"
  done
  return 0
}

if [ "${1:-}" = down ]; then
  down
  exit 0
fi

# preflight says, on one line, why this machine cannot run the cluster.
preflight() {
  [ "$(id -u)" = 0 ] || { echo "needs root (network and mount namespaces, containerd, runc)"; return; }
  local tool
  for tool in runc iptables ip nsenter unshare mountpoint; do
    command -v "$tool" >/dev/null || { echo "needs $tool on PATH (apt-get install runc iptables)"; return; }
  done
  ip netns add aisched-e2e-probe 2>/dev/null || { echo "cannot create network namespaces"; return; }
  ip netns del aisched-e2e-probe
  ip route | grep -q "^10\.25[01]\." && { echo "10.250.0.0/16 or 10.251.0.0/16 is routed on this machine already"; return; }
  return 0
}
if [ "${1:-}" = preflight ]; then
  why=$(preflight)
  [ -z "$why" ] || { echo "$why"; exit 1; }
  exit 0
fi
why=$(preflight)
[ -z "$why" ] || fail "$why"

begin=$(date +%s)
# A fresh run: everything but the binaries goes.
mkdir -p "$bin"
down
find "$work" -mindepth 1 -maxdepth 1 ! -name bin -exec rm -rf {} +
# E2E_KEEP=1 keeps the cluster, also after a failure, for a look.
trap '[ "${E2E_KEEP:-}" = 1 ] && log "the cluster stays up: KUBECONFIG=$work/up/kubeconfig; end it with hack/node-e2e/e2e.sh down" || down' EXIT

build_node kube-proxy
log "building the CNI plugins (containernetworking/plugins), helm, the release image twice (make image, linux/amd64), the demo model's image"
(cd "$repo/hack/node-e2e" && go build -o "$bin/" github.com/containernetworking/plugins/plugins/main/bridge \
  github.com/containernetworking/plugins/plugins/ipam/host-local github.com/containernetworking/plugins/plugins/main/loopback)
make -s -C "$repo" bin/helm
version=$(cd "$repo" && git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
for build in 1 2; do
  v=$version
  [ "$build" = 1 ] || v=$version-e2e.2
  make -s -C "$repo" image IMAGE_ARCHES=amd64 VERSION="$v" >/dev/null
  tar -C "$repo/bin/image" -cf "$work/release-$build.tar" .
  jq -r '.manifests[0].digest' "$repo/bin/image/index.json" > "$work/release-$build.digest"
  echo "$v" > "$work/release-$build.tag"
done
# The platform example's model image: the release binary serving the demo
# model (docs/platform.md: the aisched image with the argument demo-model).
(cd "$repo/hack/node-e2e" && go run ./mkimage -binary "$repo/bin/linux_amd64/aisched" -out "$work/demo-model.tar" \
  -entrypoint "/probe demo-model" ghcr.io/aisched/demo-model:v1)
log "built in $(( $(date +%s) - begin ))s"

log "the network: bridge $bridge ($host_ip) on the host, a namespace per node with its pod network"
cat /proc/sys/net/ipv4/ip_forward > "$work/ip_forward"
sysctl -qw net.ipv4.ip_forward=1
ip link add "$bridge" type bridge
ip addr add "$host_ip/24" dev "$bridge"
ip link set "$bridge" up
mkdir -p "$work/ns"
mount --bind "$work/ns" "$work/ns"
mount --make-private "$work/ns"
for n in "${nodes[@]}"; do
  ns=$(netns "$n")
  ip netns add "$ns"
  ip link add "ve2e-${n#node-}" type veth peer name eth0 netns "$ns"
  ip link set "ve2e-${n#node-}" master "$bridge" up
  ip -n "$ns" addr add "$(node_ip "$n")/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" route add default via "$host_ip"
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.ipv4.conf.all.route_localnet=1
  ip route add "$(pod_cidr "$n")" via "$(node_ip "$n")"
  for m in "${nodes[@]}"; do
    [ "$m" = "$n" ] || ip -n "$ns" route add "$(pod_cidr "$m")" via "$(node_ip "$m")"
  done
  # The node's own /var/lib/kubelet, /run/nri, /run/netns (its pods'
  # network namespaces) and fake GPUs: what the chart's hostPaths find.
  d=$work/$n
  mkdir -p "$d"/{kubelet,nri,netns,fake-gpu,containerd,cni/net.d,pod-logs} /var/lib/kubelet /run/nri /run/aisched-fake-gpu
  touch "$work/ns/$n"
  unshare --mount="$work/ns/$n" --propagation private true
  on_node "$n" sh -c "mount --bind '$d/kubelet' /var/lib/kubelet && mount --bind '$d/nri' /run/nri &&
    mount --bind '$d/netns' /run/netns && mount --bind '$d/fake-gpu' /run/aisched-fake-gpu"
done

log "the control plane: aisched up --advertise-address $host_ip --platform=false (scheduler profile default-scheduler only)"
cat > "$work/cluster.yaml" <<YAML
apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: none, count: 0, cpu: "1", memory: 1Gi}
YAML
cat > "$work/scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
YAML
"$bin/aisched" up --data-dir "$work/up" --fresh --cluster "$work/cluster.yaml" --scheduler-config "$work/scheduler.yaml" \
  --advertise-address "$host_ip" --platform=false --console-addr 0 > "$work/up.log" 2>&1 &
echo $! > "$work/up.pid"
kubeconfig=$work/up/kubeconfig
for _ in $(seq 120); do grep -q "is ready" "$work/up.log" && break; sleep 1; done
grep -q "is ready" "$work/up.log" || fail "aisched up did not start: $(tail -5 "$work/up.log")"
k() { "$bin/aisched" kubectl --kubeconfig "$kubeconfig" "$@"; }

# client_kubeconfig FILE CN ORG: a kubeconfig of a client certificate the
# cluster's CA signs (a node's, kube-proxy's).
client_kubeconfig() {
  local key=$1.key crt=$1.crt
  openssl req -new -newkey rsa:2048 -nodes -keyout "$key" -subj "/O=$3/CN=$2" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA "$work/up/pki/ca.crt" -CAkey "$work/up/pki/ca.key" -CAcreateserial -days 2 -out "$crt" 2>/dev/null
  local kc=("$bin/aisched" kubectl --kubeconfig "$1" config)
  "${kc[@]}" set-cluster e2e --server="https://$host_ip:6443" --certificate-authority="$work/up/pki/ca.crt" --embed-certs >/dev/null
  "${kc[@]}" set-credentials "$2" --client-certificate="$crt" --client-key="$key" --embed-certs >/dev/null
  "${kc[@]}" set-context e2e --cluster=e2e --user="$2" >/dev/null
  "${kc[@]}" use-context e2e >/dev/null
}
client_kubeconfig "$work/kube-proxy.kubeconfig" system:kube-proxy system:node-proxier

# The cards of the GPU nodes, in the columns of the agent's nvidia-smi query.
cat > "$work/node-1/fake-gpu/gpus.csv" <<CSV
0, GPU-0e2e0001-0000-4000-8000-000000000000, Tesla V100-SXM2-32GB, 32768, 0, 0, 1530, 7.0
1, GPU-0e2e0001-0000-4000-8000-000000000001, Tesla V100-SXM2-32GB, 32768, 0, 0, 1530, 7.0
CSV
cat > "$work/node-2/fake-gpu/gpus.csv" <<CSV
0, GPU-0e2e0002-0000-4000-8000-000000000000, Tesla V100-SXM2-32GB, 32768, 0, 0, 1530, 7.0
1, GPU-0e2e0002-0000-4000-8000-000000000001, Tesla V100-SXM2-32GB, 32768, 0, 0, 1530, 7.0
CSV
echo "stands for HAMi-core's libvgpu.so" > "$work/libvgpu.so"

for n in "${nodes[@]}"; do
  d=$work/$n
  log "node $n ($(node_ip "$n"), pods $(pod_cidr "$n")): containerd, its images, the kubelet, kube-proxy"
  runtime=""
  if [[ " ${gpu_nodes[*]} " == *" $n "* ]]; then
    # NVIDIA's runtime, as the node's default: containers that ask for
    # GPUs get nvidia-smi.
    runtime=$d/nvidia-container-runtime
    printf '#!/bin/sh\nexec %s runtime --gpus /run/aisched-fake-gpu/gpus.csv --runc %s -- "$@"\n' "$bin/fakegpu" "$(command -v runc)" > "$runtime"
    chmod +x "$runtime"
  fi
  containerd_config "$d/containerd.toml" "$d/containerd" "$d/cni/net.d" "$runtime"
  cat > "$d/cni/net.d/10-e2e.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "e2e", "plugins": [{"type": "bridge", "bridge": "cni0", "isGateway": true, "hairpinMode": true,
  "ipam": {"type": "host-local", "ranges": [[{"subnet": "$(pod_cidr "$n")"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$d/cni/ipam"}}]}
JSON
  PATH=$bin:$PATH start "$n" containerd "$bin/containerd" --config "$d/containerd.toml"
  wait_containerd "$d/containerd/containerd.sock" "$d/containerd.log" "$(cat "$d/containerd.pid")"
  for image in pause probe demo-model; do
    "$bin/ctr" -a "$d/containerd/containerd.sock" -n k8s.io images import "$work/$image.tar" >/dev/null 2>&1
  done
  for build in 1 2; do
    "$bin/ctr" -a "$d/containerd/containerd.sock" -n k8s.io images import --base-name ghcr.io/aisched/aisched "$work/release-$build.tar" >/dev/null 2>&1
    # By digest too, as a pull by digest names it: the chart pins the digest.
    "$bin/ctr" -a "$d/containerd/containerd.sock" -n k8s.io images tag "ghcr.io/aisched/aisched:$(cat "$work/release-$build.tag")" \
      "ghcr.io/aisched/aisched@$(cat "$work/release-$build.digest")" >/dev/null 2>&1
  done

  client_kubeconfig "$d/kubelet.kubeconfig" "system:node:$n" system:nodes
  kubelet_config "$d/kubelet.yaml" "$d/containerd" "$(node_ip "$n")" 10250 true
  start "$n" kubelet "$bin/kubelet" --config "$d/kubelet.yaml" --kubeconfig "$d/kubelet.kubeconfig" --hostname-override "$n" \
    --node-ip "$(node_ip "$n")"

  cat > "$d/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: 10.251.0.0/16
hostnameOverride: $n
clientConnection: {kubeconfig: $work/kube-proxy.kubeconfig}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# The conntrack table is the machine's: leave its sysctls alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
  start "$n" kube-proxy "$bin/kube-proxy" --config "$d/kube-proxy.yaml"

  if [ -n "$runtime" ]; then
    start "$n" device-plugin "$bin/fakegpu" device-plugin --gpus /run/aisched-fake-gpu/gpus.csv --dir /var/lib/kubelet/device-plugins
  fi
done
for _ in $(seq 180); do
  [ "$(k get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True)" = 3 ] && break
  sleep 1
done
k get nodes -o wide >&2
[ "$(k get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" = 3 ] ||
  fail "the nodes are not Ready: $(tail -3 "$work"/node-*/kubelet.log)"
log "cluster up in $(( $(date +%s) - begin ))s"

if [ "${E2E_SUITE:-1}" = 1 ]; then
  suite_begin=$(date +%s)
  (cd "$repo" && AISCHED_E2E_KUBECONFIG=$kubeconfig AISCHED_E2E_DIR=$work AISCHED_HELM=$repo/bin/helm \
    AISCHED_E2E_IMAGE=ghcr.io/aisched/aisched AISCHED_E2E_DIGESTS="$(cat "$work/release-1.digest") $(cat "$work/release-2.digest")" \
    go test -count=1 -timeout 30m -v -run '^TestE2E$' ./test/e2e/) 2>&1 | tee "$work/suite.log" |
    sed -n -E 's/^ +e2e_test.go:[0-9]+: (e2e: .*)/\1/p; s/^ +(e2e_test.go:[0-9]+: .*)/e2e: \1/p; /^(--- FAIL|FAIL|ok)/p' || true
  grep -q '^ok ' "$work/suite.log" || fail "the suite failed ($work/suite.log)"
  log "PASS: the chart on 3 real nodes, $(grep -c 'e2e: ok:' "$work/suite.log") checks; built and up in $(( suite_begin - begin ))s, suite $(( $(date +%s) - suite_begin ))s"
fi
