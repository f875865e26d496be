package queues

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
)

func queue(name, parent string, gpus int64) *aischedv1alpha1.Queue {
	return &aischedv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: aischedv1alpha1.QueueSpec{Parent: parent,
		Resources: []aischedv1alpha1.QueueResource{{Name: aischedv1alpha1.QueueGPU, Guaranteed: ptr.To(*resource.NewQuantity(gpus, resource.DecimalSI))}}}}
}

func TestValidator(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := aischedv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	busy := queue("busy", "", 4)
	busy.Status.AdmittedGroups = 2
	existing := []*aischedv1alpha1.Queue{queue("dept", "", 8), queue("team-a", "dept", 6), queue("x", "y", 0), queue("y", "", 0), busy}
	reader := fake.NewClientBuilder().WithScheme(scheme)
	for _, q := range existing {
		reader = reader.WithObjects(q)
	}
	v := &Validator{Reader: reader.Build()}
	for _, tc := range []struct {
		name        string
		q           *aischedv1alpha1.Queue
		wantErr     string
		wantWarning string
	}{
		{name: "a child that fits", q: queue("team-b", "dept", 2)},
		{name: "children over their parent", q: queue("team-b", "dept", 3),
			wantErr: "spec.resources[nvidia.com/gpu].guaranteed: Invalid value: \"9\": the children of aischedqueue dept are guaranteed 9 of nvidia.com/gpu, more than its own 8"},
		{name: "a parent lowered below its children", q: queue("dept", "", 5),
			wantErr: "spec.resources[0].guaranteed"},
		{name: "a cycle", q: queue("y", "x", 0), wantErr: "the queues would form a cycle of parents: y -> x -> y"},
		{name: "a queue with work made a parent", q: queue("child", "busy", 0), wantErr: "aischedqueue busy holds work (2 pod groups"},
		{name: "a parent that does not exist yet", q: queue("orphan", "later", 0), wantWarning: "spec.parent: aischedqueue later does not exist (yet)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warnings, err := v.ValidateCreate(context.Background(), tc.q)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one with %q", err, tc.wantErr)
			}
			if tc.wantWarning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.wantWarning)) {
				t.Errorf("warnings %v, want %q", warnings, tc.wantWarning)
			}
		})
	}
}
