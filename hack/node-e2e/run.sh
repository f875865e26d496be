#!/usr/bin/env bash
# The device path on a real node: containerd (with NRI) and runc run the
# pods of a real kubelet registered with `aisched up`; the aisched scheduler
# places GPU pods on that node with the cards of the GPUInventory that the
# node agent publishes (from fakegpu's nvidia-smi: this machine has no
# GPU; fakegpu's device plugin gives the node its nvidia.com/gpu), and the
# agent's NRI hook gives each container its card, whatever the device
# plugin picked. Each container writes its environment to a host
# directory, which the test reads.
#
# Needs root, runc on PATH and Go; builds containerd from its Go module and
# the kubelet from k8s.io/kubernetes (lib.sh, which e2e.sh shares). `make
# test-node` runs it; it is not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")"
repo=$(cd ../.. && pwd)
work=${NODE_E2E_DIR:-/tmp/aisched-node-e2e}
bin=$work/bin
node=real-0
# A fresh run: everything but the binaries goes (a previous run's cleanup
# unmounted what it had mounted).
if [ -d "$work" ]; then
  find "$work" -mindepth 1 -maxdepth 1 ! -name bin -exec rm -rf {} +
fi
mkdir -p "$bin" "$work/out"

nri_socket=$work/nri.sock
. ./lib.sh
need_root_and_runc
build_node

sock=$work/containerd/containerd.sock
ctr() { "$bin/ctr" -a "$sock" -n k8s.io "$@"; }
declare -A pid
stop() { stop_pid "${pid[$1]:-}"; pid[$1]=; }
cleanup() {
  stop plugin; stop kubelet; stop agent
  stop_tasks "$sock"
  stop containerd; stop up
  rm -f /var/lib/kubelet/device-plugins/{kubelet.sock,aisched-fake-gpu.sock,kubelet_internal_checkpoint}
  rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null || true
  grep -o " $work[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
}
trap cleanup EXIT

start_containerd() {
  PATH=$bin:$PATH "$bin/containerd" --config "$work/containerd.toml" >> "$work/containerd.log" 2>&1 &
  pid[containerd]=$!
  wait_containerd "$sock" "$work/containerd.log" "${pid[containerd]}"
}
agent_synced=0
start_agent() {
  AISCHED_FAKE_GPUS=$work/gpus.csv "$bin/aisched" agent --kubeconfig "$kubeconfig" --node-name "$node" --nvidia-smi "$bin/nvidia-smi" \
    --disk-mbps 100 --interval 2s --metrics-bind-address 0 --gpu-delivery nri --nri-socket "$work/nri.sock" \
    --gpu-isolation hami-core --hami-core-library "$work/libvgpu.so" \
    --pod-resources-socket "$work/kubelet/pod-resources/kubelet.sock" -v 2 >> "$work/agent.log" 2>&1 &
  pid[agent]=$!
}
start_kubelet() {
  "$bin/kubelet" --config "$work/kubelet.yaml" --kubeconfig "$kubeconfig" --hostname-override "$node" \
    --root-dir "$work/kubelet" --cert-dir "$work/kubelet/pki" >> "$work/kubelet.log" 2>&1 &
  pid[kubelet]=$!
}
# wait_synced N waits for the hook's Nth synchronisation with containerd.
wait_synced() {
  for _ in $(seq 60); do [ "$(grep -c 'Synchronized with the runtime' "$work/agent.log")" -ge "$1" ] && return; sleep 0.5; done
  fail "the agent's hook did not synchronise with containerd ($1)"
}

log "containerd with NRI on, its images imported"
containerd_config "$work/containerd.toml" "$work/containerd"
start_containerd
ctr images import "$work/pause.tar" >/dev/null
ctr images import "$work/probe.tar" >/dev/null

log "aisched up (one CPU node; the real node brings the GPUs)"
cat > "$work/cluster.yaml" <<YAML
apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: cpu, count: 1, cpu: "8", memory: 16Gi}
YAML
"$bin/aisched" up --data-dir "$work/up" --cluster "$work/cluster.yaml" --gateway-addr 127.0.0.1:18480 --console-addr 0 > "$work/up.log" 2>&1 &
pid[up]=$!
kubeconfig=$work/up/kubeconfig
for _ in $(seq 120); do grep -q "is ready" "$work/up.log" && break; sleep 1; done
grep -q "is ready" "$work/up.log" || fail "aisched up did not start: $(tail -5 "$work/up.log")"
k() { "$bin/aisched" kubectl --kubeconfig "$kubeconfig" "$@"; }

log "the kubelet of node $node on containerd, and the agent with its NRI hook"
kubelet_config "$work/kubelet.yaml" "$work/containerd" 127.0.0.1 10350 false
# Two cards of different memory, as nvidia-smi prints them: this machine
# has no GPU, and the delivery does not touch one.
small=GPU-0e2e0000-0000-4000-8000-000000000016
large=GPU-0e2e0000-0000-4000-8000-000000000032
cat > "$work/gpus.csv" <<CSV
0, $small, Tesla V100-PCIE-16GB, 16384, 0, 0, 1380, 7.0
1, $large, Tesla V100-SXM2-32GB, 32768, 0, 0, 1530, 7.0
CSV
ln -sf fakegpu "$bin/nvidia-smi"
echo "stands for HAMi-core's libvgpu.so" > "$work/libvgpu.so"
start_kubelet
start_agent
# The kubelet's device-plugin directory is /var/lib/kubelet/device-plugins
# whatever its --root-dir (cleanup removes what the run put there).
"$bin/fakegpu" device-plugin --gpus "$work/gpus.csv" --dir /var/lib/kubelet/device-plugins >> "$work/plugin.log" 2>&1 &
pid[plugin]=$!
wait_synced 1
for _ in $(seq 60); do k get node "$node" >/dev/null 2>&1 && k get gpuinventory "$node" >/dev/null 2>&1 && break; sleep 1; done
k get gpuinventory "$node" >/dev/null || fail "no GPUInventory for $node"
for _ in $(seq 60); do [ "$(k get node "$node" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 2 ] && break; sleep 1; done
expect "nvidia.com/gpu of $node, from the device plugin" "$(k get node "$node" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" 2

# pod NAME ANNOTATIONS RESOURCES [NODE]: a host-network pod of the probe
# image that writes its environment to $work/out/NAME.env; placed by the
# aisched scheduler on $node, or bound to NODE directly.
pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, annotations: {$2}}
spec:
  schedulerName: aisched
  ${4:+nodeName: $4}
  hostNetwork: true
  automountServiceAccountToken: false
  nodeSelector: {kubernetes.io/hostname: $node}
  tolerations: [{key: node.kubernetes.io/not-ready, operator: Exists}]
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: aisched.io/e2e/probe:1
      imagePullPolicy: Never
      args: [env, /out/$1.env]
      resources: {$3}
      volumeMounts: [{name: out, mountPath: /out}]
  volumes: [{name: out, hostPath: {path: $work/out}}]
YAML
}
# env_of NAME KEY: the value of KEY in the container of pod NAME.
env_of() {
  for _ in $(seq 120); do [ -f "$work/out/$1.env" ] && break; sleep 0.5; done
  [ -f "$work/out/$1.env" ] || fail "pod $1 did not run: $(k get pod "$1" -o jsonpath='{.status}')"
  sed -n "s/^$2=//p" "$work/out/$1.env"
}
# refused NAME CARD: pod NAME, bound past the scheduler with CARD (index
# 0) that another pod holds, is refused by the hook naming the holder.
refused() {
  pod "$1" "\"gpu.aisched.io/assigned\": \"0\", \"gpu.aisched.io/assigned-uuids\": \"$small\"" 'limits: {nvidia.com/gpu: 1}' "$node" | k apply -f - >/dev/null
  for _ in $(seq 60); do
    msg=$(k get events --field-selector "involvedObject.name=$1,reason=GPUDeliveryFailed" -o jsonpath='{.items[0].message}' 2>/dev/null || true)
    [ -n "$msg" ] && break
    sleep 0.5
  done
  case $msg in
    *"card $small is shared by pod default/share-"*) log "ok: $2: a whole-card pod on the shared card is refused: $msg" ;;
    *) fail "$2: pod $1 was not refused the shared card (event: '$msg', pod: $(k get pod "$1" -o jsonpath='{.status.containerStatuses}'))" ;;
  esac
  [ ! -f "$work/out/$1.env" ] || fail "$2: pod $1 ran"
  # The kubelet counts the refused pod's nvidia.com/gpu until it goes.
  k delete pod "$1" --wait=true >/dev/null
}

log "two pods with per-card memory needs on the node of mixed cards"
{ pod big '"gpu.aisched.io/memory": "32Gi"' 'limits: {nvidia.com/gpu: 1}'; echo ---; pod any '' 'limits: {nvidia.com/gpu: 1}'; } | k apply -f - >/dev/null
expect "the 32 GiB pod's cards" "$(env_of big NVIDIA_VISIBLE_DEVICES)" "$large"
expect "the other pod's cards" "$(env_of any NVIDIA_VISIBLE_DEVICES)" "$small"
expect "what the scheduler assigned the 32 GiB pod" "$(k get pod big -o jsonpath='{.metadata.annotations.gpu\.aisched\.io/assigned-uuids}')" "$large"
k delete pod big any --wait=true >/dev/null

log "two shared pods on one card, each with its own limits"
{ pod share-1 '"gpu.aisched.io/milli": "300", "gpu.aisched.io/gpumem": "4000"' ''; echo ---
  pod share-2 '"gpu.aisched.io/milli": "500", "gpu.aisched.io/gpumem": "8000"' ''; } | k apply -f - >/dev/null
card=$(env_of share-1 NVIDIA_VISIBLE_DEVICES)
expect "share-2's card, share-1's" "$(env_of share-2 NVIDIA_VISIBLE_DEVICES)" "$card"
expect "the shared card, the scheduler's" "$(k get pod share-1 -o jsonpath='{.metadata.annotations.gpu\.aisched\.io/assigned-uuids}')" "$card"
[ "$card" = "$small" ] || fail "the shares packed on $card; the checks below expect $small"
expect "share-1's memory limit" "$(env_of share-1 CUDA_DEVICE_MEMORY_LIMIT_0)" 4000m
expect "share-2's memory limit" "$(env_of share-2 CUDA_DEVICE_MEMORY_LIMIT_0)" 8000m
expect "share-1's SM limit" "$(env_of share-1 CUDA_DEVICE_SM_LIMIT)" 30
expect "share-2's SM limit" "$(env_of share-2 CUDA_DEVICE_SM_LIMIT)" 50
expect "HAMi-core's library inside share-1" "$(env_of share-1 PROBE_PRELOAD_PRESENT)" "$work/libvgpu.so:true"
refused intruder-1 "first run"

log "containerd restarts"
stop containerd
start_containerd
wait_synced 2
refused intruder-2 "after containerd's restart"
log "the agent restarts"
stop agent
start_agent
wait_synced 3
refused intruder-3 "after the agent's restart"
log "the kubelet restarts"
stop kubelet
start_kubelet
sleep 5
refused intruder-4 "after the kubelet's restart"
for p in share-1 share-2; do
  expect "$p after the restarts" "$(k get pod "$p" -o jsonpath='{.status.phase}')" Running
done

log "the shares end: both cards are free for pods of whole cards"
k delete pod share-1 share-2 --wait=true >/dev/null
{ pod whole-1 '' 'limits: {nvidia.com/gpu: 1}'; echo ---; pod whole-2 '' 'limits: {nvidia.com/gpu: 1}'; } | k apply -f - >/dev/null
expect "the whole-card pods' cards" "$(printf '%s\n' "$(env_of whole-1 NVIDIA_VISIBLE_DEVICES)" "$(env_of whole-2 NVIDIA_VISIBLE_DEVICES)" | sort | tr '\n' ' ')" "$small $large "
[ -n "$(k get gpuinventory "$node" -o jsonpath='{.status.checkTime}')" ] || fail "the agent never wrote its drift check to GPUInventory $node"
expect "pods with drift on $node" "$(k get gpuinventory "$node" -o jsonpath='{.status.driftCount}')" ""
log "PASS"
