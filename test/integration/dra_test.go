package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/local/localtest"
)

// TestDRAClaim: a pod that asks for a device through a ResourceClaimTemplate
// gets its claim from the resourceclaim controller, and the scheduler's
// DynamicResources plugin (in the aisched profile as in upstream's)
// allocates it from a node's ResourceSlice and binds the pod there. Both
// GPU paths can meet in one cluster: aisched's own cards are not in any
// ResourceSlice (docs/device-path.md, "DRA").
func TestDRAClaim(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: cpu, count: 2, cpu: "16", memory: 64Gi}
`)
	ctx := context.Background()
	const driver = "gpu.example.com"
	node := "cpu-1"
	if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "example-gpu"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + "gpus"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices:  []resourcev1.Device{{Name: "gpu-0"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := "dra"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "example-gpu"}}},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dra", Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName:  "aisched",
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
			Containers: []corev1.Container{{
				Name: "main", Image: "busybox",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	localtest.Eventually(t, time.Minute, "the pod bound to the node of the ResourceSlice with its claim allocated", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "dra", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, fmt.Errorf("no claim created for the pod: %+v", p.Status)
		}
		claim, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		allocated := claim.Status.Allocation != nil && len(claim.Status.Allocation.Devices.Results) == 1 && claim.Status.Allocation.Devices.Results[0].Device == "gpu-0"
		return p.Spec.NodeName == node && allocated, fmt.Errorf("pod on %q, claim status %+v, pod conditions %+v", p.Spec.NodeName, claim.Status, p.Status.Conditions)
	})
}
