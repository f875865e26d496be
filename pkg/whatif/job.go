package whatif

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	appsdefaults "k8s.io/kubernetes/pkg/apis/apps/v1"
	batchdefaults "k8s.io/kubernetes/pkg/apis/batch/v1"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // the core API's versions, defaults and conversions in legacyscheme
	coredefaults "k8s.io/kubernetes/pkg/apis/core/v1"
	podregistry "k8s.io/kubernetes/pkg/registry/core/pod"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/util/yamlfile"
)

// MaxPods bounds the pods one job may make: a job that large is a typo.
const MaxPods = 10000

// Job is what whatif places: the pods a set of manifests makes, and the
// PodGroups they declare.
type Job struct {
	Pods      []*corev1.Pod
	PodGroups []*schedulingv1alpha1.PodGroup
	// makers are the manifests' objects that make Pods, in order, each
	// with how many of them it made: a Pod makes itself.
	makers []maker
	// existing are the pods (namespace/name) and PodGroups
	// ("podgroup:namespace/name") already in the cluster (resolve).
	existing map[string]bool
}

// maker is a manifest's object that makes pods: a Pod, Job, Deployment,
// ReplicaSet or StatefulSet.
type maker struct {
	kind, namespace, name string
	pods                  int
}

// ParseJob reads manifests, the file name (YAML or JSON, several
// documents), into a Job. Pods are taken as they are; a Job makes its
// parallelism's pods, a Deployment, ReplicaSet or StatefulSet its
// replicas', from their template, named <name>-<i>; a PodGroup is kept.
// Objects without a namespace get namespace. Any other kind is an error
// that names it; a field no object has is an error too, as kubectl's
// strict validation makes it; each error starts with "name:line:". Each
// object gets the apiserver's defaults, and each pod those the apiserver
// gives a pod it creates (defaultPod), so that a pod made from a template
// reads as the one its controller would create: requests from limits, for
// GPUs above all.
func ParseJob(name string, data []byte, namespace string) (*Job, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, schedulingv1alpha1.AddToScheme,
		coredefaults.RegisterDefaults, appsdefaults.RegisterDefaults, batchdefaults.RegisterDefaults,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	decode := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	docs, err := yamlfile.Documents(name, data)
	if err != nil {
		return nil, err
	}
	job := &Job{}
	for _, doc := range docs {
		obj, gvk, err := decode.Decode(doc.Data, nil, nil)
		if err != nil {
			return nil, doc.Errors(name, err)
		}
		scheme.Default(obj)
		if err := job.add(obj, namespace); err != nil {
			return nil, doc.At(name, fmt.Errorf("%s: %w", gvk.Kind, err))
		}
		if len(job.Pods) > MaxPods {
			return nil, doc.At(name, fmt.Errorf("the manifests make more than %d pods", MaxPods))
		}
	}
	if len(job.Pods) == 0 {
		return nil, fmt.Errorf("%s: the manifests make no pod: give a Pod, Job, Deployment, ReplicaSet or StatefulSet", name)
	}
	for i, p := range job.Pods {
		d, err := defaultPod(p)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		job.Pods[i] = d
	}
	return job, nil
}

// defaultPod returns the pod as the apiserver would create it: with the
// defaults of its version (requests from limits, which a template does
// not get) and the pod strategy's (pod-level resources, the status of a
// new pod), through kube-apiserver's own code.
func defaultPod(p *corev1.Pod) (*corev1.Pod, error) {
	versioned := p.DeepCopy()
	legacyscheme.Scheme.Default(versioned)
	internal := &api.Pod{}
	if err := legacyscheme.Scheme.Convert(versioned, internal, nil); err != nil {
		return nil, err
	}
	podregistry.Strategy.PrepareForCreate(context.Background(), internal)
	out := &corev1.Pod{}
	if err := legacyscheme.Scheme.Convert(internal, out, nil); err != nil {
		return nil, err
	}
	out.TypeMeta = metav1.TypeMeta{}
	return out, nil
}

func (j *Job) add(obj runtime.Object, namespace string) error {
	switch o := obj.(type) {
	case *corev1.Pod:
		p := o.DeepCopy()
		if p.Namespace == "" {
			p.Namespace = namespace
		}
		if p.Name == "" {
			return errors.New("metadata.name: required")
		}
		j.Pods = append(j.Pods, p)
		j.makers = append(j.makers, maker{kind: "Pod", namespace: p.Namespace, name: p.Name, pods: 1})
	case *schedulingv1alpha1.PodGroup:
		g := o.DeepCopy()
		if g.Namespace == "" {
			g.Namespace = namespace
		}
		j.PodGroups = append(j.PodGroups, g)
	case *batchv1.Job:
		n := int32(1)
		if o.Spec.Parallelism != nil {
			n = *o.Spec.Parallelism
		}
		if o.Spec.Completions != nil && *o.Spec.Completions < n {
			n = *o.Spec.Completions
		}
		return j.expand("Job", o.ObjectMeta, o.Spec.Template, n, namespace)
	case *appsv1.Deployment:
		return j.expand("Deployment", o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), namespace)
	case *appsv1.ReplicaSet:
		return j.expand("ReplicaSet", o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), namespace)
	case *appsv1.StatefulSet:
		return j.expand("StatefulSet", o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), namespace)
	default:
		return fmt.Errorf("kind %T is not one whatif places: give a Pod, Job, Deployment, ReplicaSet, StatefulSet or PodGroup", obj)
	}
	return nil
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// expand makes n pods from the template of a workload of kind.
func (j *Job) expand(kind string, meta metav1.ObjectMeta, tmpl corev1.PodTemplateSpec, n int32, namespace string) error {
	if meta.Name == "" {
		return errors.New("metadata.name: required")
	}
	if n < 0 || n > MaxPods {
		return fmt.Errorf("%d pods: want 0 to %d", n, MaxPods)
	}
	ns := meta.Namespace
	if ns == "" {
		ns = namespace
	}
	for i := range n {
		p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		p.Name, p.Namespace = fmt.Sprintf("%s-%d", meta.Name, i), ns
		j.Pods = append(j.Pods, p)
	}
	j.makers = append(j.makers, maker{kind: kind, namespace: ns, name: meta.Name, pods: int(n)})
	return nil
}
