// Package testing holds object builders shared by tests:
//
//	MakePod("p", "ns").Req("cpu", "1").GPU(2).Obj()
package testing

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// ResourceGPU is NVIDIA's extended resource.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// PodWrapper builds a Pod.
type PodWrapper struct{ corev1.Pod }

// MakePod returns a pod with one container "c" and no requests.
func MakePod(name, namespace string) *PodWrapper {
	return &PodWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(namespace + "/" + name)},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
		},
	}}
}

// Obj returns the pod.
func (p *PodWrapper) Obj() *corev1.Pod { return &p.Pod }

// Req adds a request of the first container: Req("cpu", "500m").
func (p *PodWrapper) Req(name corev1.ResourceName, quantity string) *PodWrapper {
	c := &p.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[name] = resource.MustParse(quantity)
	return p
}

// GPU sets the first container's nvidia.com/gpu limit (and so its request).
func (p *PodWrapper) GPU(n int64) *PodWrapper {
	c := &p.Spec.Containers[0]
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Limits[ResourceGPU] = *resource.NewQuantity(n, resource.DecimalSI)
	return p.Req(ResourceGPU, resource.NewQuantity(n, resource.DecimalSI).String())
}

// Node binds the pod to a node.
func (p *PodWrapper) Node(name string) *PodWrapper {
	p.Spec.NodeName = name
	return p
}

// BoundAt marks the pod bound to its node at t, as the apiserver does with
// the PodScheduled condition.
func (p *PodWrapper) BoundAt(t time.Time) *PodWrapper {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t),
	})
	return p
}

// SchedulerName sets spec.schedulerName.
func (p *PodWrapper) SchedulerName(name string) *PodWrapper {
	p.Spec.SchedulerName = name
	return p
}

// Annotation sets an annotation.
func (p *PodWrapper) Annotation(key, value string) *PodWrapper {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[key] = value
	return p
}

// Label sets a label.
func (p *PodWrapper) Label(key, value string) *PodWrapper {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[key] = value
	return p
}

// SchedulingGate adds a scheduling gate.
func (p *PodWrapper) SchedulingGate(name string) *PodWrapper {
	p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: name})
	return p
}

// RestartPolicy sets spec.restartPolicy.
func (p *PodWrapper) RestartPolicy(policy corev1.RestartPolicy) *PodWrapper {
	p.Spec.RestartPolicy = policy
	return p
}

// HostNetwork puts the pod in the node's network namespace.
func (p *PodWrapper) HostNetwork() *PodWrapper {
	p.Spec.HostNetwork = true
	return p
}

// MakeDeployment returns a Deployment of replicas pods built from the pod
// template (its name and namespace are ignored).
func MakeDeployment(name, namespace string, replicas int32, template *corev1.Pod) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels, template),
		},
	}
}

// MakeJob returns a Job running completions pods in parallel, built from
// the pod template (its restart policy must be Never or OnFailure).
func MakeJob(name, namespace string, completions int32, template *corev1.Pod) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(completions),
			Parallelism: ptr.To(completions),
			Template:    podTemplate(nil, template),
		},
	}
}

func podTemplate(labels map[string]string, pod *corev1.Pod) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: pod.Annotations},
		Spec:       *pod.Spec.DeepCopy(),
	}
}
