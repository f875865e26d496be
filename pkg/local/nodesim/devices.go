package nodesim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	nri "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/aisched/aisched/pkg/agent/deliver"
	"github.com/aisched/aisched/pkg/gpu"
)

// devices is the simulated nodes' container runtime, as far as the device
// path goes: for each node with cards, NRI's runtime side (the adaptation
// library containerd embeds) and the node agent's delivery hook
// (deliver.Hook) connected to it over a unix socket. The containers of a
// GPU pod are created through it, as containerd would create them, so
// that the cards the hook gives them can be checked against the simulated
// device layer's (the allocator's). A node's runtime starts with its first
// GPU pod; the trace replay, whose pods never start, starts none.
type devices struct {
	dir  string
	pods corelisters.PodLister
	// ctx bounds the hooks' connections.
	ctx context.Context

	mu    sync.Mutex
	nodes map[string]*nodeRuntime
	// restored are the pods that ran before a restart, by node and pod
	// key, for the first synchronisation of the node's runtime.
	restored map[string]map[string]podContainers
	// podNode is the node of each pod with containers here, by pod key.
	podNode map[string]string
}

// podContainers is a pod's sandbox and containers in a runtime.
type podContainers struct {
	sandbox *api.PodSandbox
	ctrs    []*api.Container
}

// nodeRuntime is one node's NRI runtime side and hook.
type nodeRuntime struct {
	nri  *nri.Adaptation
	hook *deliver.Hook
	stop func()
	// cards are the node's, from its inventory.
	cards []gpu.Card

	mu      sync.Mutex
	sandbox map[string]*api.PodSandbox
	ctrs    map[string][]*api.Container
}

// hookConnectTimeout bounds the wait for a node's hook to connect.
const hookConnectTimeout = 10 * time.Second

func newDevices(ctx context.Context, pods corelisters.PodLister) (*devices, error) {
	// Short: a unix socket's path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "aisched-nri-")
	if err != nil {
		return nil, fmt.Errorf("a directory for the simulated runtimes' NRI sockets: %w", err)
	}
	return &devices{dir: dir, pods: pods, ctx: ctx, nodes: map[string]*nodeRuntime{}, restored: map[string]map[string]podContainers{}, podNode: map[string]string{}}, nil
}

// close stops every node's hook and runtime and removes their sockets.
func (d *devices) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, rt := range d.nodes {
		rt.stop()
	}
	d.nodes = map[string]*nodeRuntime{}
	os.RemoveAll(d.dir)
}

// runtime returns the runtime of node n, starting it and its hook.
func (d *devices) runtime(n Node) (*nodeRuntime, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if rt, ok := d.nodes[n.Object.Name]; ok {
		return rt, nil
	}
	rt := &nodeRuntime{sandbox: map[string]*api.PodSandbox{}, ctrs: map[string][]*api.Container{}}
	for key, pc := range d.restored[n.Object.Name] {
		rt.sandbox[key], rt.ctrs[key] = pc.sandbox, pc.ctrs
	}
	delete(d.restored, n.Object.Name)
	dir := filepath.Join(d.dir, fmt.Sprintf("n%d", len(d.nodes)))
	for _, sub := range []string{"plugins", "conf.d"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	socket := filepath.Join(dir, "nri.sock")
	adaptation, err := nri.New("aisched-nodesim", "v1", rt.synchronize, func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
		nri.WithPluginPath(filepath.Join(dir, "plugins")), nri.WithPluginConfigPath(filepath.Join(dir, "conf.d")), nri.WithSocketPath(socket))
	if err != nil {
		return nil, err
	}
	if err := adaptation.Start(); err != nil {
		return nil, err
	}
	rt.cards = gpu.FromInventory(n.Inventory)
	hook, err := deliver.NewHook(deliver.HookOptions{
		Pods:       deliver.ListerPods{Lister: d.pods},
		Cards:      func(context.Context) ([]gpu.Card, error) { return rt.cards, nil },
		SocketPath: socket,
	})
	if err != nil {
		adaptation.Stop()
		return nil, err
	}
	ctx, cancel := context.WithCancel(d.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hook.Run(ctx)
	}()
	rt.nri, rt.hook = adaptation, hook
	rt.stop = func() {
		cancel()
		adaptation.Stop()
		<-done
	}
	for deadline := time.Now().Add(hookConnectTimeout); hook.Syncs() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			rt.stop()
			return nil, fmt.Errorf("node %s: the delivery hook did not connect to the simulated runtime in %s", n.Object.Name, hookConnectTimeout)
		}
	}
	d.nodes[n.Object.Name] = rt
	return rt, nil
}

// synchronize lists the node's containers, as the runtime does to each
// plugin that connects.
func (rt *nodeRuntime) synchronize(ctx context.Context, cb nri.SyncCB) error {
	rt.mu.Lock()
	pods := make([]*api.PodSandbox, 0, len(rt.sandbox))
	for _, sb := range rt.sandbox {
		pods = append(pods, sb)
	}
	var ctrs []*api.Container
	for _, cs := range rt.ctrs {
		ctrs = append(ctrs, cs...)
	}
	rt.mu.Unlock()
	_, err := cb(ctx, pods, ctrs)
	return err
}

// sandboxOf is the pod's sandbox as containerd hands it to NRI: the pod's
// annotations are the sandbox configuration's, as the kubelet passes them.
func sandboxOf(pod *corev1.Pod) *api.PodSandbox {
	return &api.PodSandbox{Id: "sandbox-" + string(pod.UID), Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Annotations: pod.Annotations}
}

// start creates the pod's containers through node n's runtime. Each
// container that requests nvidia.com/gpu gets from the simulated device
// plugin NVIDIA_VISIBLE_DEVICES naming the cards the allocator gave the pod
// (heldIndices), as NVIDIA's plugin would; the hook then adjusts it. It
// returns the UUIDs, sorted, of the cards the hook delivered and of those
// the allocator holds, or the hook's refusal.
func (d *devices) start(n Node, key string, pod *corev1.Pod, heldIndices []int) (delivered, held []string, err error) {
	rt, err := d.runtime(n)
	if err != nil {
		return nil, nil, err
	}
	for _, i := range heldIndices {
		if c := gpu.CardByIndex(rt.cards, i); c != nil {
			held = append(held, c.UUID)
		}
	}
	slices.Sort(held)
	d.mu.Lock()
	d.podNode[key] = n.Object.Name
	d.mu.Unlock()
	ctx := d.ctx
	// As containerd does: a plugin being synchronised is fully registered
	// before the runtime relays requests.
	block := rt.nri.BlockPluginSync()
	defer block.Unblock()
	sb := sandboxOf(pod)
	if err := rt.nri.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: sb}); err != nil {
		return nil, nil, err
	}
	rt.mu.Lock()
	rt.sandbox[key] = sb
	rt.mu.Unlock()
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		var env []string
		if _, ok := c.Resources.Limits[gpu.ResourceName]; ok && len(held) > 0 {
			env = append(env, deliver.VisibleDevicesEnv+"="+strings.Join(held, ","))
		}
		ctr := &api.Container{Id: key + "/" + c.Name, PodSandboxId: sb.Id, Name: c.Name, State: api.ContainerState_CONTAINER_CREATED, Env: env}
		resp, err := rt.nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: sb, Container: ctr})
		if err != nil {
			block.Unblock()
			d.stop(key)
			return nil, nil, err
		}
		for _, kv := range resp.GetAdjust().GetEnv() {
			ctr.Env = append(ctr.Env, kv.GetKey()+"="+kv.GetValue())
			if kv.GetKey() == deliver.UUIDsEnv {
				delivered = append(delivered, strings.Split(kv.GetValue(), ",")...)
			}
		}
		ctr.State = api.ContainerState_CONTAINER_RUNNING
		rt.mu.Lock()
		rt.ctrs[key] = append(rt.ctrs[key], ctr)
		rt.mu.Unlock()
	}
	slices.Sort(delivered)
	return slices.Compact(delivered), held, nil
}

// restore records the containers of a pod that ran before a restart of
// the simulator, with the environment the hook gave them, so that the
// node's hook finds them held when it synchronises.
func (d *devices) restore(n Node, key string, pod *corev1.Pod) {
	cards := gpu.FromInventory(n.Inventory)
	var ctrs []*api.Container
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		dl, err := deliver.Plan(pod, c.Name, cards)
		if err != nil || dl.Empty() {
			continue
		}
		adj := &api.ContainerAdjustment{}
		deliver.Layer{Naming: deliver.NamingEnv, Isolation: deliver.IsolationNone}.Adjust(dl, adj)
		ctr := &api.Container{Id: key + "/" + c.Name, PodSandboxId: sandboxOf(pod).Id, Name: c.Name, State: api.ContainerState_CONTAINER_RUNNING}
		for _, kv := range adj.GetEnv() {
			ctr.Env = append(ctr.Env, kv.GetKey()+"="+kv.GetValue())
		}
		ctrs = append(ctrs, ctr)
	}
	if len(ctrs) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.podNode[key] = n.Object.Name
	if rt, ok := d.nodes[n.Object.Name]; ok {
		rt.mu.Lock()
		rt.sandbox[key] = sandboxOf(pod)
		rt.ctrs[key] = ctrs
		rt.mu.Unlock()
		return
	}
	if d.restored[n.Object.Name] == nil {
		d.restored[n.Object.Name] = map[string]podContainers{}
	}
	d.restored[n.Object.Name][key] = podContainers{sandbox: sandboxOf(pod), ctrs: ctrs}
}

// stop stops and removes the pod's containers, if it has any here.
func (d *devices) stop(key string) {
	d.mu.Lock()
	node, ok := d.podNode[key]
	delete(d.podNode, key)
	delete(d.restored[node], key)
	rt := d.nodes[node]
	d.mu.Unlock()
	if !ok || rt == nil {
		return
	}
	rt.mu.Lock()
	sb, ctrs := rt.sandbox[key], rt.ctrs[key]
	delete(rt.sandbox, key)
	delete(rt.ctrs, key)
	rt.mu.Unlock()
	block := rt.nri.BlockPluginSync()
	var errs []error
	for _, c := range ctrs {
		_, err := rt.nri.StopContainer(d.ctx, &api.StopContainerRequest{Pod: sb, Container: c})
		errs = append(errs, err)
		errs = append(errs, rt.nri.RemoveContainer(d.ctx, &api.RemoveContainerRequest{Pod: sb, Container: c}))
	}
	if sb != nil {
		errs = append(errs, rt.nri.StopPodSandbox(d.ctx, &api.StopPodSandboxRequest{Pod: sb}), rt.nri.RemovePodSandbox(d.ctx, &api.RemovePodSandboxRequest{Pod: sb}))
	}
	block.Unblock()
	if err := errors.Join(errs...); err != nil {
		klog.FromContext(d.ctx).Error(err, "Stopping a pod's containers in the simulated runtime", "pod", key)
	}
}
