package agent

import (
	"context"
	"errors"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/aisched/aisched/pkg/agent/deliver"
)

// DeliveryOptions configure the delivery of the scheduler's cards to the
// node's containers (package deliver). WatchClient is required.
type DeliveryOptions struct {
	// WatchClient watches the node's pods and records events on them. Its
	// requests must have no timeout: watches outlive one.
	WatchClient kubernetes.Interface
	// Layer says how cards and shares reach containers.
	Layer deliver.Layer
	// SocketPath is the runtime's NRI socket; default deliver's.
	SocketPath string
	// PodResources is the kubelet's PodResources API, read to find drift
	// and to locate the cards of other schedulers' pods; nil leaves it
	// out.
	PodResources podresourcesv1.PodResourcesListerClient
}

// StartDelivery runs the delivery hook (the NRI plugin that gives each
// container of an aisched-placed pod its cards) and the drift checker
// (every Options.Interval, once the node's pods are listed) until ctx
// ends or stop is called; stop returns once both have. Their metrics join
// Handler's, and their reports on pods are events of component
// aisched-agent. The checker writes with Options.KubeClient and
// Options.Client, which StartDelivery needs.
func (a *Agent) StartDelivery(ctx context.Context, opts DeliveryOptions) (stop func(), err error) {
	if opts.WatchClient == nil || a.opts.KubeClient == nil {
		return nil, errors.New("DeliveryOptions.WatchClient and Options.KubeClient are required")
	}
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(opts.WatchClient, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.opts.NodeName).String()
	}))
	pods := factory.Core().V1().Pods()
	lister := pods.Lister()
	factory.Start(ctx.Done())

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: opts.WatchClient.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "aisched-agent", Host: a.opts.NodeName})
	report := func(pod *corev1.Pod, eventType, reason, message string) {
		recorder.Event(pod, eventType, reason, message)
	}
	shutdown := func() {
		cancel()
		factory.Shutdown()
		broadcaster.Shutdown()
	}

	hook, err := deliver.NewHook(deliver.HookOptions{
		Pods: deliver.ListerPods{Lister: lister}, Cards: a.Cards, Layer: opts.Layer, SocketPath: opts.SocketPath, Recorder: report,
	})
	if err != nil {
		shutdown()
		return nil, err
	}
	checker, err := deliver.NewChecker(deliver.CheckerOptions{
		NodeName: a.opts.NodeName, Pods: lister, Holdings: hook.Holdings(), PodResources: opts.PodResources, Cards: a.Cards,
		Client: a.opts.KubeClient, Inventories: a.opts.Client, Recorder: report,
	})
	if err != nil {
		shutdown()
		return nil, err
	}
	a.MustRegister(checker.Metrics()...)
	a.MustRegister(hook.Metrics()...)

	var wg sync.WaitGroup
	wg.Go(func() { _ = hook.Run(ctx) })
	wg.Go(func() {
		if cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
			checker.Run(ctx, a.opts.Interval)
		}
	})
	return func() {
		cancel()
		wg.Wait()
		shutdown()
	}, nil
}
