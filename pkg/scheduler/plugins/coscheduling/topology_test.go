package coscheduling

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/topology"
)

// TestPreFilterDomainUnplaced: a member of a group that asks for a
// topology domain, while the queue's plan has placed the group in none
// (its admission revoked after a failed attempt), waits instead of being
// placed anywhere; a member of a group that asks for none goes on.
func TestPreFilterDomainUnplaced(t *testing.T) {
	pl := newPlugin()
	pl.queue = &jobqueue.Queue{} // no plan yet: no group is placed
	ref := podgroup.Ref{Namespace: "ns", Name: "tp2", MinAvailable: 4}
	for _, tc := range []struct {
		name        string
		pod         map[string]string
		group       map[string]string
		wantRefused bool
	}{
		{name: "no domain asked"},
		{name: "aisched's key on the pod", pod: map[string]string{"topology.aisched.io/required": "example.com/rack"}, wantRefused: true},
		{name: "KAI's segments on the pod", pod: map[string]string{topology.KAITopology: "t", topology.KAISegmentSize: "2", "kai.scheduler/segment-topology-required-placement": "rack"}, wantRefused: true},
		{name: "the PodGroup asks", group: map[string]string{"topology.aisched.io/required": "example.com/rack"}, wantRefused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m-0", Annotations: tc.pod}}
			r := ref
			r.Annotations = tc.group
			state := framework.NewCycleState()
			res, s := pl.preFilterDomain(state, pod, r)
			if res != nil {
				t.Errorf("PreFilterResult %v, want none without a plan", res)
			}
			if got := s.Code() == fwk.UnschedulableAndUnresolvable; got != tc.wantRefused {
				t.Fatalf("status %v, want refused %v", s, tc.wantRefused)
			}
			if tc.wantRefused && !strings.Contains(s.Message(), "pod group ns/tp2 asks for a topology domain") {
				t.Errorf("message %q does not name the group and why", s.Message())
			}
		})
	}
}
