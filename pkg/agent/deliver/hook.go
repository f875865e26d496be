package deliver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/aisched/aisched/pkg/gpu"
)

// PluginName is the hook's name among the runtime's NRI plugins.
const PluginName = "aisched-gpu"

// DefaultPluginIndex orders the hook among NRI plugins: after the low
// indices that resource-policy plugins take, so that its environment is
// the last word on NVIDIA_VISIBLE_DEVICES.
const DefaultPluginIndex = "90"

// Event reasons the hook gives on pods.
const (
	ReasonDeliveryFailed   = "GPUDeliveryFailed"
	ReasonShareNotEnforced = "GPUShareNotEnforced"
	ReasonDrift            = "GPUDrift"
)

// PodSource returns a pod of this node by namespace and name, with the
// given UID. It may wait a little: the kubelet creates containers of pods
// that the agent's watch has not delivered yet.
type PodSource interface {
	Pod(ctx context.Context, namespace, name, uid string) (*corev1.Pod, error)
}

// Recorder reports on a pod, as an event.
type Recorder func(pod *corev1.Pod, eventType, reason, message string)

// HookOptions configure a Hook. Pods and Cards are required.
type HookOptions struct {
	Pods PodSource
	// Cards returns the node's cards (nvidia-smi's list, or the node's
	// GPUInventory).
	Cards func(context.Context) ([]gpu.Card, error)
	// Layer says how cards and shares reach containers; default env
	// naming and no isolation.
	Layer Layer
	// Recorder reports failures and unenforced shares on pods; nil
	// reports them in the log only.
	Recorder Recorder
	// SocketPath is the runtime's NRI socket; default
	// /var/run/nri/nri.sock.
	SocketPath string
	// PluginIndex orders the hook among NRI plugins; default
	// DefaultPluginIndex.
	PluginIndex string
}

// Hook is the node agent's NRI plugin: it gives each container of a pod
// that aisched placed the cards of the pod's assignment.
type Hook struct {
	opts     HookOptions
	holdings *Holdings
	// syncs counts the runtime's synchronizations: one per connection.
	syncs atomic.Int64
	// containers counts the containers of aisched-placed pods the hook
	// was asked about, by result.
	containers *k8smetrics.CounterVec
}

// Results of a container the hook was asked about, the values of the
// result label of aisched_agent_gpu_containers_total.
const (
	resultDelivered = "delivered"
	resultNoGPU     = "no_gpu"
	resultRefused   = "refused"
)

// NewHook returns a hook with the defaults of opts filled in.
func NewHook(opts HookOptions) (*Hook, error) {
	if opts.Pods == nil || opts.Cards == nil {
		return nil, errors.New("HookOptions.Pods and HookOptions.Cards are required")
	}
	if opts.Layer.Naming == "" {
		opts.Layer.Naming = NamingEnv
	}
	if opts.Layer.Isolation == "" {
		opts.Layer.Isolation = IsolationNone
	}
	if err := opts.Layer.Validate(); err != nil {
		return nil, err
	}
	if opts.SocketPath == "" {
		opts.SocketPath = api.DefaultSocketPath
	}
	if opts.PluginIndex == "" {
		opts.PluginIndex = DefaultPluginIndex
	}
	h := &Hook{opts: opts, holdings: NewHoldings(), containers: k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Namespace: "aisched", Subsystem: "agent", Name: "gpu_containers_total", StabilityLevel: k8smetrics.ALPHA,
		Help: "Containers of pods that aisched placed on cards, as the delivery hook handled them: delivered (their cards given), no_gpu (a container of such a pod without cards), refused (creation failed with the hook's reason).",
	}, []string{"result"})}
	return h, nil
}

// Metrics are the hook's counters, for the agent's registry.
func (h *Hook) Metrics() []k8smetrics.Registerable {
	return []k8smetrics.Registerable{h.containers}
}

// Syncs is the number of times the runtime synchronized with the hook:
// one per connection, so it grows after each runtime restart.
func (h *Hook) Syncs() int64 { return h.syncs.Load() }

// Holdings is the record of what live containers hold.
func (h *Hook) Holdings() *Holdings { return h.holdings }

// Run connects to the runtime and serves it until ctx ends, connecting
// again, after a backoff of 1s doubling up to 30s, whenever the runtime
// goes away (a restart of containerd) or is not there yet.
func (h *Hook) Run(ctx context.Context) error {
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Cap: 30 * time.Second, Steps: 1 << 30}
	for {
		err := h.serve(ctx)
		if ctx.Err() != nil {
			return nil
		}
		delay := backoff.Step()
		klog.InfoS("NRI connection ended; connecting again", "socket", h.opts.SocketPath, "err", err, "after", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// serve runs one connection.
func (h *Hook) serve(ctx context.Context) error {
	s, err := stub.New(plugin{h},
		stub.WithPluginName(PluginName),
		stub.WithPluginIdx(h.opts.PluginIndex),
		stub.WithSocketPath(h.opts.SocketPath))
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// plugin is the Hook as the NRI stub sees it; its methods are the NRI
// events the hook subscribes to.
type plugin struct{ h *Hook }

func (p plugin) Configure(context.Context, string, string, string) (api.EventMask, error) {
	return api.MustParseEventMask("CreateContainer", "StopContainer", "RemoveContainer"), nil
}

// Synchronize rebuilds the holdings from the runtime's live containers.
func (p plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	byID := make(map[string]*api.PodSandbox, len(pods))
	for _, sb := range pods {
		byID[sb.GetId()] = sb
	}
	cards, err := p.h.opts.Cards(ctx)
	if err != nil {
		klog.ErrorS(err, "Reading the node's cards to rebuild the holdings; containers that name cards by index are left out")
	}
	held := map[string]Holding{}
	for _, c := range ctrs {
		if c.GetState() == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		if hd, ok := holdingOf(byID[c.GetPodSandboxId()], c, cards); ok {
			held[c.GetId()] = hd
		}
	}
	p.h.holdings.Reset(held)
	p.h.syncs.Add(1)
	klog.InfoS("Synchronized with the runtime", "containers", len(ctrs), "holdingGPUs", len(held))
	return nil, nil
}

// CreateContainer gives the container its cards.
func (p plugin) CreateContainer(ctx context.Context, sb *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	h := p.h
	if _, ok := sb.GetAnnotations()[gpu.AssignedAnnotation]; !ok {
		// Not placed on cards by aisched: record what the container holds
		// by the node's device plugin, if anything.
		cards, _ := h.opts.Cards(ctx)
		if hd, ok := holdingOf(sb, c, cards); ok {
			h.holdings.Add(c.GetId(), hd)
		}
		return nil, nil, nil
	}
	pod, err := h.opts.Pods.Pod(ctx, sb.GetNamespace(), sb.GetName(), sb.GetUid())
	if err != nil {
		h.containers.WithLabelValues(resultRefused).Inc()
		return nil, nil, fmt.Errorf("aisched GPU delivery: pod %s/%s: %w", sb.GetNamespace(), sb.GetName(), err)
	}
	adj, err := h.deliver(ctx, pod, c)
	switch {
	case err != nil:
		h.containers.WithLabelValues(resultRefused).Inc()
		h.report(pod, corev1.EventTypeWarning, ReasonDeliveryFailed, err.Error())
		return nil, nil, err
	case adj == nil:
		h.containers.WithLabelValues(resultNoGPU).Inc()
	default:
		h.containers.WithLabelValues(resultDelivered).Inc()
	}
	return adj, nil, nil
}

// deliver plans c's cards, admits them to the holdings and returns the
// adjustment; nil when c gets no GPU.
func (h *Hook) deliver(ctx context.Context, pod *corev1.Pod, c *api.Container) (*api.ContainerAdjustment, error) {
	cards, err := h.opts.Cards(ctx)
	if err != nil {
		return nil, fmt.Errorf("aisched GPU delivery: reading the node's cards: %w", err)
	}
	d, err := Plan(pod, c.GetName(), cards)
	if err != nil || d.Empty() {
		return nil, err
	}
	name := pod.Namespace + "/" + pod.Name
	hd := Holding{Pod: name, PodUID: string(pod.UID), Container: c.GetName(), UUIDs: d.UUIDs, Share: d.Share, Delivered: true}
	if err := h.holdings.Admit(c.GetId(), hd, cards); err != nil {
		return nil, fmt.Errorf("aisched GPU delivery: pod %s container %s: %w", name, c.GetName(), err)
	}
	adj := &api.ContainerAdjustment{}
	if warning := h.opts.Layer.Adjust(d, adj); warning != "" {
		h.report(pod, corev1.EventTypeWarning, ReasonShareNotEnforced, warning)
	}
	klog.V(2).InfoS("Delivering GPUs", "pod", name, "container", c.GetName(), "uuids", d.UUIDs, "shared", d.Share != nil)
	return adj, nil
}

func (p plugin) StopContainer(_ context.Context, _ *api.PodSandbox, c *api.Container) ([]*api.ContainerUpdate, error) {
	p.h.holdings.Remove(c.GetId())
	return nil, nil
}

func (p plugin) RemoveContainer(_ context.Context, _ *api.PodSandbox, c *api.Container) error {
	p.h.holdings.Remove(c.GetId())
	return nil
}

func (h *Hook) report(pod *corev1.Pod, eventType, reason, message string) {
	klog.InfoS("GPU delivery", "pod", klog.KObj(pod), "reason", reason, "message", message)
	if h.opts.Recorder != nil {
		h.opts.Recorder(pod, eventType, reason, message)
	}
}

// holdingOf reads what a live container holds from its environment: the
// hook's own record when it delivered the cards, or else the cards
// NVIDIA_VISIBLE_DEVICES names (UUIDs, or indices of cards).
func holdingOf(sb *api.PodSandbox, c *api.Container, cards []gpu.Card) (Holding, bool) {
	env := map[string]string{}
	for _, kv := range c.GetEnv() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	hd := Holding{Container: c.GetName()}
	if sb != nil {
		hd.Pod, hd.PodUID = sb.GetNamespace()+"/"+sb.GetName(), sb.GetUid()
	}
	if v := env[UUIDsEnv]; v != "" {
		hd.UUIDs, hd.Delivered = strings.Split(v, ","), true
		if s, ok := env[ShareEnv]; ok {
			sh, err := parseShare(s)
			if err != nil {
				// Count it whole: a share misread must not let another
				// pod take its card.
				klog.ErrorS(err, "Reading a delivered share; counting the card whole", "container", c.GetId())
			} else {
				hd.Share = &sh
			}
		}
		return hd, true
	}
	for _, v := range strings.Split(env[VisibleDevicesEnv], ",") {
		v = strings.TrimSpace(v)
		switch {
		case strings.HasPrefix(v, "GPU-"), strings.HasPrefix(v, "MIG-"):
			hd.UUIDs = append(hd.UUIDs, v)
		default:
			if idx, err := strconv.Atoi(v); err == nil {
				if card := gpu.CardByIndex(cards, idx); card != nil && card.UUID != "" {
					hd.UUIDs = append(hd.UUIDs, card.UUID)
				}
			}
		}
	}
	return hd, len(hd.UUIDs) > 0
}
