package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	v1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/controller-manager/pkg/informerfactory"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmconfig "k8s.io/kubernetes/cmd/kube-controller-manager/app/config"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
)

// controllerNames are the kube-controller-manager controllers that run in
// `aisched up`: those that users of Deployments, StatefulSets, DaemonSets,
// Jobs, Services, quotas, RBAC and DRA's ResourceClaimTemplates rely on. The node lifecycle controller is
// left out on purpose: simulated nodes never fail, and after a long stop it
// would evict every pod before the simulated kubelets renew their leases.
// It runs when real kubelets join (realNodeControllers).
var controllerNames = []string{
	names.DeploymentController,
	names.ReplicaSetController,
	names.StatefulSetController,
	names.DaemonSetController,
	names.JobController,
	names.CronJobController,
	names.TTLAfterFinishedController,
	names.GarbageCollectorController,
	names.NamespaceController,
	names.EndpointSliceController,
	names.ServiceAccountController,
	names.RootCACertificatePublisherController,
	names.ResourceQuotaController,
	names.PodGarbageCollectorController,
	names.DisruptionController,
	names.ClusterRoleAggregationController,
	// Creates the ResourceClaims of pods' claim templates, without which a
	// pod asking for DRA devices waits with no claim and no event.
	names.ResourceClaimController,
}

// realNodeControllers run too when real kubelets join (an advertise
// address): the node lifecycle controller takes a registering node's
// not-ready taint away once it is Ready, and taints nodes that stop
// reporting, as on any cluster.
var realNodeControllers = []string{names.NodeLifecycleController}

// controllerShutdownTimeout bounds the wait for controllers to return after
// their context is cancelled.
const controllerShutdownTimeout = 5 * time.Second

// runControllers builds the controllers of controllerNames (and of
// realNodeControllers with realNodes) and runs them until ctx is
// cancelled. started is closed once every controller runs.
func runControllers(ctx context.Context, cfg *rest.Config, caFile string, realNodes bool, started chan<- struct{}) error {
	componentConfig, err := kcmoptions.NewDefaultComponentConfig()
	if err != nil {
		return err
	}
	componentConfig.Generic.LeaderElection.LeaderElect = false
	componentConfig.SAController.RootCAFile = caFile
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "kube-controller-manager")
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&v1core.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	c := (&kcmconfig.Config{
		ComponentConfig:           componentConfig,
		Client:                    client,
		Kubeconfig:                cfg,
		EventBroadcaster:          broadcaster,
		EventRecorder:             broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kube-controller-manager"}),
		ControllerShutdownTimeout: controllerShutdownTimeout,
	}).Complete()

	controllerCtx, err := newControllerContext(ctx, c)
	if err != nil {
		return err
	}
	descriptors := kcm.NewControllerDescriptors()
	var controllers []kcm.Controller
	run := controllerNames
	if realNodes {
		run = append(slices.Clone(run), realNodeControllers...)
	}
	for _, name := range run {
		ctrl, err := descriptors[name].BuildController(ctx, controllerCtx)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		if ctrl != nil {
			controllers = append(controllers, ctrl)
		}
	}
	controllerCtx.InformerFactory.Start(ctx.Done())
	defer controllerCtx.InformerFactory.Shutdown()
	controllerCtx.ObjectOrMetadataInformerFactory.Start(ctx.Done())
	close(controllerCtx.InformersStarted)
	close(started)
	if !kcm.RunControllers(ctx, controllerCtx, controllers, 0, controllerShutdownTimeout) {
		return errors.New("controllers did not stop within " + controllerShutdownTimeout.String())
	}
	return nil
}

// newControllerContext is kcm.CreateControllerContext without the
// process-wide informer name, which upstream never releases and which would
// forbid a second cluster in the same process (tests run many).
func newControllerContext(ctx context.Context, c *kcmconfig.CompletedConfig) (kcm.ControllerContext, error) {
	trim := func(obj interface{}) (interface{}, error) {
		if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
			accessor.SetManagedFields(nil)
		}
		return obj, nil
	}
	builder := clientbuilder.SimpleControllerClientBuilder{ClientConfig: c.Kubeconfig}
	client, err := builder.Client("shared-informers")
	if err != nil {
		return kcm.ControllerContext{}, err
	}
	resync := kcm.ResyncPeriod(c)
	sharedInformers := informers.NewSharedInformerFactoryWithOptions(client, resync(), informers.WithTransform(trim))
	metadataClient, err := metadata.NewForConfig(builder.ConfigOrDie("metadata-informers"))
	if err != nil {
		return kcm.ControllerContext{}, err
	}
	metadataInformers := metadatainformer.NewSharedInformerFactoryWithOptions(metadataClient, resync(), metadatainformer.WithTransform(trim))
	discoveryClient, err := builder.DiscoveryClient("controller-discovery")
	if err != nil {
		return kcm.ControllerContext{}, err
	}
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(discoveryClient))
	go wait.Until(restMapper.Reset, 30*time.Second, ctx.Done())

	controllerCtx := kcm.ControllerContext{
		ClientBuilder:                   builder,
		InformerFactory:                 sharedInformers,
		ObjectOrMetadataInformerFactory: informerfactory.NewInformerFactory(sharedInformers, metadataInformers),
		ComponentConfig:                 c.ComponentConfig,
		RESTMapper:                      restMapper,
		InformersStarted:                make(chan struct{}),
		ResyncPeriod:                    resync,
		ControllerManagerMetrics:        controllersmetrics.NewControllerManagerMetrics("kube-controller-manager"),
	}
	ignored := map[schema.GroupResource]struct{}{}
	for _, r := range c.ComponentConfig.GarbageCollectorController.GCIgnoredResources {
		ignored[schema.GroupResource{Group: r.Group, Resource: r.Resource}] = struct{}{}
	}
	controllerCtx.GraphBuilder = garbagecollector.NewDependencyGraphBuilder(ctx, metadataClient, restMapper, ignored,
		controllerCtx.ObjectOrMetadataInformerFactory, controllerCtx.InformersStarted)
	controllersmetrics.Register()
	return controllerCtx, nil
}
