package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/gpu"
)

// maxDriftListed bounds GPUInventory's status.drift.
const maxDriftListed = 64

// CheckerOptions configure a Checker. NodeName, Pods, Cards, Client and
// Inventories are required.
type CheckerOptions struct {
	NodeName string
	// Pods lists the node's pods.
	Pods corelisters.PodLister
	// Holdings is the delivery hook's record; nil when the node has no hook.
	Holdings *Holdings
	// PodResources is the kubelet's PodResources API; nil leaves it out.
	PodResources podresourcesv1.PodResourcesListerClient
	Cards        func(context.Context) ([]gpu.Card, error)
	// Client annotates the pods it locates.
	Client kubernetes.Interface
	// Inventories writes the drift to the node's GPUInventory status.
	Inventories versioned.Interface
	// Recorder reports drift on pods; nil logs it only.
	Recorder Recorder
}

// Checker finds drift between what the node's containers hold and what the
// scheduler assigned, and locates the cards of GPU pods that another
// scheduler placed. It reports drift as a pod event (once per pod and
// content), in the node's GPUInventory status and in its metrics, and
// writes located cards to the pods' gpu.aisched.io/located annotation,
// which the scheduler's GPU ledger reads.
type Checker struct {
	opts CheckerOptions
	// reported is the last drift message of each pod.
	reported map[types.UID]string
	// written is the drift last written to the GPUInventory status.
	written []aischedv1alpha1.GPUDrift

	driftPods, locatedPods *k8smetrics.Gauge
}

// NewChecker returns a checker; its metrics are Metrics().
func NewChecker(opts CheckerOptions) (*Checker, error) {
	if opts.NodeName == "" || opts.Pods == nil || opts.Cards == nil || opts.Client == nil || opts.Inventories == nil {
		return nil, errors.New("CheckerOptions.NodeName, Pods, Cards, Client and Inventories are required")
	}
	gauge := func(name, help string) *k8smetrics.Gauge {
		return k8smetrics.NewGauge(ptr.To(k8smetrics.GaugeOpts{Namespace: "aisched", Subsystem: "agent", Name: name, Help: help, StabilityLevel: k8smetrics.ALPHA}))
	}
	return &Checker{
		opts:     opts,
		reported: map[types.UID]string{},
		driftPods: gauge("gpu_drift_pods",
			"Pods of the node whose containers hold other GPUs than the scheduler assigned, or none while running, at the last check."),
		locatedPods: gauge("gpu_located_pods",
			"Running GPU pods of the node that another scheduler placed, whose cards the agent located, at the last check."),
	}, nil
}

// Metrics are the checker's gauges, for the agent's registry.
func (c *Checker) Metrics() []k8smetrics.Registerable {
	return []k8smetrics.Registerable{c.driftPods, c.locatedPods}
}

// Run checks every interval until ctx ends.
func (c *Checker) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := c.Once(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Checking the GPUs containers hold")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once compares once and reports; it returns the errors of what it could
// not read or write, having done the rest.
func (c *Checker) Once(ctx context.Context) error {
	cards, err := c.opts.Cards(ctx)
	if err != nil {
		return err
	}
	pods, err := c.opts.Pods.List(labels.Everything())
	if err != nil {
		return err
	}
	var errs []error
	var resources []*podresourcesv1.PodResources
	if c.opts.PodResources != nil {
		resp, err := c.opts.PodResources.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
		if err != nil {
			errs = append(errs, fmt.Errorf("the kubelet's PodResources API: %w", err))
		}
		resources = resp.GetPodResources()
	}
	var holdings map[string]Holding
	if c.opts.Holdings != nil {
		holdings = c.opts.Holdings.All()
	}
	drift, located := Compare(pods, holdings, resources, cards)
	c.driftPods.Set(float64(len(drift)))
	c.locatedPods.Set(float64(len(located)))

	current := map[types.UID]bool{}
	for _, d := range drift {
		current[d.Pod.UID] = true
		msg := fmt.Sprintf("its containers hold cards [%s]; the scheduler assigned [%s]", strings.Join(d.Held, ", "), strings.Join(d.Assigned, ", "))
		if c.reported[d.Pod.UID] == msg {
			continue
		}
		c.reported[d.Pod.UID] = msg
		klog.InfoS("GPU drift", "pod", klog.KObj(d.Pod), "held", d.Held, "assigned", d.Assigned)
		if c.opts.Recorder != nil {
			c.opts.Recorder(d.Pod, corev1.EventTypeWarning, ReasonDrift, msg)
		}
	}
	for uid := range c.reported {
		if !current[uid] {
			delete(c.reported, uid)
		}
	}
	for _, l := range located {
		if err := c.locate(ctx, l); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.writeStatus(ctx, drift, len(cards) > 0); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// locate writes the located cards on the pod, unless it says so already.
func (c *Checker) locate(ctx context.Context, l Located) error {
	v := gpu.FormatIndices(l.Indices)
	if l.Pod.Annotations[gpu.LocatedAnnotation] == v {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations":     map[string]string{gpu.LocatedAnnotation: v},
		"resourceVersion": l.Pod.ResourceVersion,
	}})
	if err != nil {
		return err
	}
	_, err = c.opts.Client.CoreV1().Pods(l.Pod.Namespace).Patch(ctx, l.Pod.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "aisched-agent"})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("locating the cards of pod %s/%s: %w", l.Pod.Namespace, l.Pod.Name, err)
	}
	return nil
}

// writeStatus writes the drift to the node's GPUInventory when it changed.
func (c *Checker) writeStatus(ctx context.Context, drift []Drift, hasCards bool) error {
	list := make([]aischedv1alpha1.GPUDrift, 0, len(drift))
	for _, d := range drift {
		list = append(list, aischedv1alpha1.GPUDrift{Pod: d.Pod.Namespace + "/" + d.Pod.Name, Assigned: d.Assigned, Held: d.Held})
	}
	slices.SortFunc(list, func(a, b aischedv1alpha1.GPUDrift) int { return strings.Compare(a.Pod, b.Pod) })
	if !hasCards || c.written != nil && apiequality.Semantic.DeepEqual(c.written, list) {
		return nil
	}
	inventories := c.opts.Inventories.AischedV1alpha1().GPUInventories()
	inv, err := inventories.Get(ctx, c.opts.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Not published yet: the next check writes it.
		return nil
	}
	if err != nil {
		return err
	}
	inv.Status.CheckTime = ptr.To(metav1.Now())
	inv.Status.DriftCount = int32(len(list))
	inv.Status.Drift = list[:min(len(list), maxDriftListed)]
	if _, err := inventories.UpdateStatus(ctx, inv, metav1.UpdateOptions{FieldManager: "aisched-agent"}); err != nil {
		return fmt.Errorf("writing the drift to GPUInventory %s: %w", c.opts.NodeName, err)
	}
	c.written = list
	return nil
}

// DialPodResources returns a client of the kubelet's PodResources API on
// the unix socket at path (/var/lib/kubelet/pod-resources/kubelet.sock);
// it connects at its first call, and again after the kubelet restarts.
func DialPodResources(path string) (podresourcesv1.PodResourcesListerClient, io.Closer, error) {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("the kubelet's PodResources socket %s: %w", path, err)
	}
	return podresourcesv1.NewPodResourcesListerClient(conn), conn, nil
}
