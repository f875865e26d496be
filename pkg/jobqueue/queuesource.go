package jobqueue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/generated/informers/externalversions"
	"github.com/aisched/aisched/pkg/queuetree"
	"github.com/aisched/aisched/pkg/util/crdwatch"
	"github.com/aisched/aisched/pkg/util/quote"
)

// queueSyncTimeout bounds the wait for the queues' caches at start.
const queueSyncTimeout = 30 * time.Second

// queueSource reads the team queues: aisched's Queues, and Volcano's and
// KAI-Scheduler's Queues when their CRDs are served (translated into the
// one model at this edge, peers.go), and the namespaces' queue labels; it
// names the leaf queue of each pod.
type queueSource struct {
	aisched      cache.Indexer
	volcano, kai cache.Indexer
	namespaces   corelisters.NamespaceLister
	synced       []cache.InformerSynced

	mu sync.Mutex
	// specs are the queues as last read; stale is set by every change.
	specs []queuetree.Spec
	stale bool
	// names are the queues by name, and defaults the default queue of
	// each form.
	names    map[string]*queuetree.Spec
	defaults map[string]string
}

// start follows the queues and namespaces; onChange is called on every
// change of a queue or a namespace's labels.
func (s *queueSource) start(ctx context.Context, client versioned.Interface, dyn dynamic.Interface, factory informers.SharedInformerFactory, onChange func()) error {
	s.stale = true
	changed := crdwatch.OnChange(func() { s.invalidate(); onChange() })
	if client != nil {
		indexer, synced, err := crdwatch.Watch(ctx, client, aischedv1alpha1.SchemeGroupVersion.WithResource("aischedqueues"), queueSyncTimeout,
			func(f externalversions.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Aisched().V1alpha1().AischedQueues().Informer()
			}, changed)
		if err != nil {
			return err
		}
		if indexer != nil {
			s.aisched = indexer
			s.synced = append(s.synced, synced)
		}
		for _, peer := range []struct {
			into *cache.Indexer
			form peerForm
		}{{&s.volcano, volcanoQueues}, {&s.kai, kaiQueues}} {
			informer, err := crdwatch.StartDynamic(ctx, client.Discovery(), dyn, peer.form.resource, queueSyncTimeout, changed)
			if err != nil {
				return err
			}
			if informer != nil {
				*peer.into = informer.GetIndexer()
				klog.FromContext(ctx).Info("Reading peers' queues", "resource", peer.form.resource)
			}
		}
	}
	nsInformer := factory.Core().V1().Namespaces().Informer()
	reg, err := nsInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { onChange() },
		UpdateFunc: func(old, obj interface{}) {
			o, ok1 := old.(*corev1.Namespace)
			n, ok2 := obj.(*corev1.Namespace)
			if ok1 && ok2 && o.Labels[aischedv1alpha1.QueueLabel] != n.Labels[aischedv1alpha1.QueueLabel] {
				onChange()
			}
		},
	})
	if err != nil {
		return err
	}
	s.namespaces = factory.Core().V1().Namespaces().Lister()
	s.synced = append(s.synced, reg.HasSynced)
	return nil
}

func (s *queueSource) invalidate() {
	s.mu.Lock()
	s.stale = true
	s.mu.Unlock()
}

// read returns the queues' specs, translated from every form, and the
// default queue by form.
func (s *queueSource) read() ([]queuetree.Spec, map[string]*queuetree.Spec, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stale {
		return s.specs, s.names, s.defaults
	}
	s.stale = false
	s.specs = s.specs[:0:0]
	if s.aisched != nil {
		for _, obj := range s.aisched.List() {
			if q, ok := obj.(*aischedv1alpha1.Queue); ok {
				s.specs = append(s.specs, queuetree.SpecOf(q))
			}
		}
	}
	for _, peer := range []struct {
		store cache.Indexer
		form  peerForm
	}{{s.volcano, volcanoQueues}, {s.kai, kaiQueues}} {
		if peer.store == nil {
			continue
		}
		for _, obj := range peer.store.List() {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				s.specs = append(s.specs, peer.form.spec(u))
			}
		}
	}
	slices.SortFunc(s.specs, func(a, b queuetree.Spec) int { return compareStrings(a.Name, b.Name) })
	s.names = make(map[string]*queuetree.Spec, len(s.specs))
	s.defaults = map[string]string{}
	for i := range s.specs {
		sp := &s.specs[i]
		s.names[sp.Name] = sp
		if sp.Default {
			form := formPrefix(sp.Name)
			if _, ok := s.defaults[form]; !ok {
				s.defaults[form] = sp.Name
			}
		}
	}
	return s.specs, s.names, s.defaults
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// formPrefix is the prefix of a queue name of a peer's form ("kai/"),
// "" for aisched's own.
func formPrefix(name string) string {
	for _, f := range []peerForm{volcanoQueues, kaiQueues} {
		if len(name) > len(f.prefix) && name[:len(f.prefix)] == f.prefix {
			return f.prefix
		}
	}
	return ""
}

// active reports whether any queue exists: only then is work queued by
// team, pods in no group included.
func (s *queueSource) active() bool {
	specs, _, _ := s.read()
	return len(specs) > 0
}

// queueOf names the queue a pod's work goes to: the pod's label
// scheduling.aisched.io/queue, else a peer's form on the pod (KAI's
// kai.scheduler/queue label, Volcano's scheduling.volcano.sh/queue-name
// annotation), else its namespace's label, else the default queue. It
// returns "" when the work is in no queue, and a problem, naming the key,
// when the queue named cannot hold work. Pods Kueue admits are in no
// queue: Kueue has admitted them against its own.
func (s *queueSource) queueOf(pod *corev1.Pod) (name, problem string) {
	if KueueManaged(pod) {
		return "", ""
	}
	specs, names, defaults := s.read()
	if len(specs) == 0 {
		return "", ""
	}
	key, value, form := "", "", peerForm{}
	switch {
	case pod.Labels[aischedv1alpha1.QueueLabel] != "":
		key, value = "label "+aischedv1alpha1.QueueLabel, pod.Labels[aischedv1alpha1.QueueLabel]
	case pod.Labels[kaiQueues.podKey] != "":
		key, value, form = "label "+kaiQueues.podKey, pod.Labels[kaiQueues.podKey], kaiQueues
	case pod.Annotations[volcanoQueues.podKey] != "":
		key, value, form = "annotation "+volcanoQueues.podKey, pod.Annotations[volcanoQueues.podKey], volcanoQueues
	default:
		if ns, err := s.namespaces.Get(pod.Namespace); err == nil && ns.Labels[aischedv1alpha1.QueueLabel] != "" {
			key, value = "namespace "+pod.Namespace+" label "+aischedv1alpha1.QueueLabel, ns.Labels[aischedv1alpha1.QueueLabel]
		}
	}
	if key == "" {
		return defaults[""], ""
	}
	name = form.prefix + value
	if _, ok := names[name]; ok {
		return name, ""
	}
	what := "aischedqueue"
	if form.prefix != "" {
		what = form.object
		if !s.served(form) {
			return "", fmt.Sprintf("%s=%s: %s's Queue CRD (%s) is not installed; name an aischedqueue with the label %s",
				key, quote.Value(value), form.peer, form.resource.GroupVersion(), aischedv1alpha1.QueueLabel)
		}
	}
	return "", fmt.Sprintf("%s=%s: there is no %s %s", key, quote.Value(value), what, quote.Value(value))
}

func (s *queueSource) served(f peerForm) bool {
	switch f.prefix {
	case volcanoQueues.prefix:
		return s.volcano != nil
	case kaiQueues.prefix:
		return s.kai != nil
	}
	return true
}

// leafProblem says why queue name of tree t cannot hold work, "" when it
// can.
func leafProblem(t *queuetree.Tree, name string) string {
	n := t.Queue(name)
	switch {
	case n == nil:
		return fmt.Sprintf("queue %s does not exist", name)
	case n.Invalid() != "":
		return fmt.Sprintf("%s cannot hold work: %s", n.Object, n.Invalid())
	case !n.Leaf():
		return fmt.Sprintf("%s has child queues; only leaf queues hold work", n.Object)
	}
	return ""
}
