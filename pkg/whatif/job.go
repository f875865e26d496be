package whatif

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	appsdefaults "k8s.io/kubernetes/pkg/apis/apps/v1"
	batchdefaults "k8s.io/kubernetes/pkg/apis/batch/v1"
	coredefaults "k8s.io/kubernetes/pkg/apis/core/v1"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
)

// MaxPods bounds the pods one job may make: a job that large is a typo.
const MaxPods = 10000

// Job is what whatif places: the pods a set of manifests makes, and the
// PodGroups they declare.
type Job struct {
	Pods      []*corev1.Pod
	PodGroups []*schedulingv1alpha1.PodGroup
}

// ParseJob reads manifests (YAML or JSON, several documents) into a Job.
// Pods are taken as they are; a Job makes its parallelism's pods, a
// Deployment, ReplicaSet or StatefulSet its replicas', from their
// template, named <name>-<i>; a PodGroup is kept. Objects without a
// namespace get namespace. Any other kind is an error that names it. Each
// object gets the apiserver's defaults first, so that a pod reads as it
// would once created (requests from limits, for GPUs above all).
func ParseJob(r io.Reader, namespace string) (*Job, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, schedulingv1alpha1.AddToScheme,
		coredefaults.RegisterDefaults, appsdefaults.RegisterDefaults, batchdefaults.RegisterDefaults,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	decode := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	job := &Job{}
	for doc := 1; ; doc++ {
		data, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		obj, gvk, err := decode.Decode(data, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		scheme.Default(obj)
		if err := job.add(obj, namespace); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", doc, gvk.Kind, err)
		}
		if len(job.Pods) > MaxPods {
			return nil, fmt.Errorf("the manifests make more than %d pods", MaxPods)
		}
	}
	if len(job.Pods) == 0 {
		return nil, errors.New("the manifests make no pod: give a Pod, Job, Deployment, ReplicaSet or StatefulSet")
	}
	return job, nil
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
		return j.expand(o.ObjectMeta, o.Spec.Template, n, namespace)
	case *appsv1.Deployment:
		return j.expand(o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), namespace)
	case *appsv1.ReplicaSet:
		return j.expand(o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), namespace)
	case *appsv1.StatefulSet:
		return j.expand(o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), namespace)
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

// expand makes n pods from a workload's template.
func (j *Job) expand(meta metav1.ObjectMeta, tmpl corev1.PodTemplateSpec, n int32, namespace string) error {
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
	return nil
}
