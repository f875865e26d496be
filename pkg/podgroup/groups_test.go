package podgroup

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned/fake"
	"github.com/aisched/aisched/pkg/generated/informers/externalversions"
)

// A PodGroup the job queue created for a group its pods' labels size
// changes nothing when it arrives; one a user creates, or a change of
// the queue's PodGroup's spec, is told.
func TestOnPodGroupSkipsCreatedFromLabels(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewSimpleClientset()
	factory := externalversions.NewSharedInformerFactory(client, 0)
	g := &Groups{podGroups: factory.Scheduling().V1alpha1().PodGroups().Informer()}
	var mu sync.Mutex
	var told []string
	if err := g.OnPodGroup(func(key string) { mu.Lock(); told = append(told, key); mu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), g.podGroups.HasSynced) {
		t.Fatal("cache not synced")
	}
	pgs := client.SchedulingV1alpha1().PodGroups("ns")
	shown := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "from-labels", Namespace: "ns", Generation: 1,
		Annotations: map[string]string{CreatedFromLabelsAnnotation: "true"}}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 4}}
	if _, err := pgs.Create(ctx, shown, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pgs.Create(ctx, &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "users", Namespace: "ns", Generation: 1},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	edited := shown.DeepCopy()
	edited.Generation, edited.Spec.MinMember = 2, 3
	if _, err := pgs.Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"ns/users", "ns/from-labels"}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(told) >= len(want), nil
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || !slices.Equal(told, want) {
		t.Fatalf("told %v, want %v (the queue's own PodGroup arriving is not told; its edit is)", told, want)
	}
}
