package platform

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
)

// selectorLabels select the pods of an instance.
func selectorLabels(inst *v1alpha1.OperatorInstance) map[string]string {
	return map[string]string{v1alpha1.InstanceLabel: inst.Name}
}

// applyDeployment sets the parts of d that the instance owns: replicas,
// selector and the pod template made from the Operator. Fields the
// apiserver defaults are left as they are, so that an unchanged instance
// makes no update.
func applyDeployment(d *appsv1.Deployment, inst *v1alpha1.OperatorInstance, op *v1alpha1.Operator, replicas int32, schedulerName string) {
	d.Spec.Replicas = &replicas
	if d.Spec.Selector == nil {
		// The selector is immutable; it is set once.
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: selectorLabels(inst)}
	}
	labels := selectorLabels(inst)
	labels[v1alpha1.OperatorLabel] = op.Name
	d.Labels = labels
	t := &d.Spec.Template
	t.Labels = labels
	t.Annotations = podAnnotations(inst, op)
	t.Spec.SchedulerName = schedulerName
	old := t.Spec.Containers
	t.Spec.Containers = make([]corev1.Container, len(op.Spec.Containers))
	for i, oc := range op.Spec.Containers {
		c := corev1.Container{}
		for _, o := range old {
			if o.Name == oc.Name {
				c = o // keep the defaulted fields (pull policy, termination message)
			}
		}
		c.Name, c.Image, c.Command, c.Args, c.Env = oc.Name, oc.Image, oc.Command, oc.Args, oc.Env
		c.Ports = nil
		for _, p := range oc.Ports {
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.Port, Protocol: corev1.ProtocolTCP})
		}
		c.Resources = resources(oc)
		c.LivenessProbe, c.ReadinessProbe = mergeProbe(c.LivenessProbe, oc.LivenessProbe), mergeProbe(c.ReadinessProbe, oc.ReadinessProbe)
		t.Spec.Containers[i] = c
	}
}

// mergeProbe returns want, keeping the defaults the apiserver filled into
// have where want leaves them out.
func mergeProbe(have, want *corev1.Probe) *corev1.Probe {
	if want == nil {
		return nil
	}
	p := want.DeepCopy()
	if have == nil {
		return p
	}
	for _, f := range []struct{ dst, src *int32 }{
		{&p.TimeoutSeconds, &have.TimeoutSeconds}, {&p.PeriodSeconds, &have.PeriodSeconds},
		{&p.SuccessThreshold, &have.SuccessThreshold}, {&p.FailureThreshold, &have.FailureThreshold},
	} {
		if *f.dst == 0 {
			*f.dst = *f.src
		}
	}
	if p.HTTPGet != nil && have.HTTPGet != nil && p.HTTPGet.Scheme == "" {
		p.HTTPGet.Scheme = have.HTTPGet.Scheme
	}
	return p
}

// resources makes a container's requests and limits: CPU and memory
// requested and limited alike (the Guaranteed class an inference server
// wants), whole cards as nvidia.com/gpu.
func resources(oc v1alpha1.OperatorContainer) corev1.ResourceRequirements {
	var r corev1.ResourceRequirements
	set := func(name corev1.ResourceName, q resource.Quantity) {
		if r.Requests == nil {
			r.Requests, r.Limits = corev1.ResourceList{}, corev1.ResourceList{}
		}
		r.Requests[name], r.Limits[name] = q, q
	}
	if oc.CPU != nil {
		set(corev1.ResourceCPU, *oc.CPU)
	}
	if oc.Memory != nil {
		set(corev1.ResourceMemory, *oc.Memory)
	}
	if oc.GPUs > 0 {
		set(gpu.ResourceName, *resource.NewQuantity(int64(oc.GPUs), resource.DecimalSI))
	}
	return r
}

// podAnnotations are the instance's pod annotations and those the GPU
// plugins read, from the Operator.
func podAnnotations(inst *v1alpha1.OperatorInstance, op *v1alpha1.Operator) map[string]string {
	a := map[string]string{}
	for k, v := range inst.Spec.PodAnnotations {
		a[k] = v
	}
	if g := op.Spec.GPU; g != nil {
		addGPUAnnotations(a, g)
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

func addGPUAnnotations(a map[string]string, g *v1alpha1.GPUConstraints) {
	if len(g.Models) > 0 {
		a[gpu.ModelsAnnotation] = strings.Join(g.Models, ",")
	}
	if g.Memory != nil {
		a[gpu.MemoryAnnotation] = g.Memory.String()
	}
	if g.Cores != nil {
		a[gpu.CoresAnnotation] = strconv.FormatInt(*g.Cores, 10)
	}
	if g.Milli != nil {
		a[gpu.MilliAnnotation] = strconv.Itoa(int(*g.Milli))
	}
	if g.MemoryShareMiB != nil {
		a[gpu.GPUMemAnnotation] = strconv.Itoa(int(*g.MemoryShareMiB))
	}
}
