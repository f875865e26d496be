package jobqueue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// The cache answers DemandOf per pod object, a changed pod (a new object)
// anew, and keeps only the objects the last pass looked at.
func TestDemandCache(t *testing.T) {
	var c demandCache
	a := st.MakePod().Name("a").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2"}).Obj()
	b := st.MakePod().Name("b").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	c.next()
	if diff := cmp.Diff(DemandOf(a).Request, c.of(a).Request); diff != "" {
		t.Errorf("demand of a (-want,+got):\n%s", diff)
	}
	c.of(b)
	c.next()
	// a changed: the informer holds a new object.
	a2 := st.MakePod().Name("a").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}).Obj()
	if got := c.of(a2).Request.MilliCPU; got != 3000 {
		t.Errorf("the changed a: %d mCPU, want 3000", got)
	}
	c.of(b)
	c.next()
	if _, ok := c.last[a]; ok {
		t.Error("the old object of a is still remembered")
	}
	if _, ok := c.last[b]; !ok {
		t.Error("b, looked at in the last pass, is forgotten")
	}
}
