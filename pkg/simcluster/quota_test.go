package simcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With ResourceQuotas, the fast engine refuses a pod over its namespace's
// quota as kube-apiserver does, and the quota's use follows the pods: a
// pod that ends gives its part back, and the refused pod is then admitted.
func TestFastQuotas(t *testing.T) {
	c := startTestClusterWith(t, Options{MetricsInterval: -1, ResourceQuotas: true})
	ctx := context.Background()
	start := c.Now()
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: "default"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("2")}}}
	if _, err := c.Client().CoreV1().ResourceQuotas("default").Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	used := func() string {
		t.Helper()
		q, err := c.Client().CoreV1().ResourceQuotas("default").Get(ctx, "gpus", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u := q.Status.Used["requests.nvidia.com/gpu"]
		return u.String()
	}
	if got := used(); got != "0" {
		t.Errorf("used %s before any pod, want 0", got)
	}
	create := func(p *corev1.Pod) error {
		_, err := c.Client().CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		return err
	}
	if err := create(testPod("a", "aisched", "1", time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := used(); got != "1" {
		t.Errorf("used %s with pod a of 1 card, want 1", got)
	}
	// 1 used + 2 asked > 2.
	err := create(testPod("b", "aisched", "2", time.Minute))
	want := `pods "b" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=2`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("creating b: %v, want Forbidden %q", err, want)
	}
	// A pod without cards is not limited by a quota of cards.
	if err := create(testPod("c", "aisched", "", time.Minute)); err != nil {
		t.Errorf("creating a pod without cards: %v", err)
	}
	if err := c.RunUntil(ctx, start.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := used(); got != "0" {
		t.Errorf("used %s after a ended, want 0", got)
	}
	if err := create(testPod("b", "aisched", "2", time.Minute)); err != nil {
		t.Errorf("creating b once a ended: %v", err)
	}
	if got := used(); got != "2" {
		t.Errorf("used %s with b, want 2", got)
	}
	if err := c.Client().CoreV1().Pods("default").Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := used(); got != "0" {
		t.Errorf("used %s after b was deleted, want 0", got)
	}
}

// Without ResourceQuotas, the fast engine refuses to create a quota it
// would not enforce.
func TestFastRefusesQuotas(t *testing.T) {
	c := startTestCluster(t)
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: "default"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("2")}}}
	_, err := c.Client().CoreV1().ResourceQuotas("default").Create(context.Background(), q, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no ResourceQuota admission") {
		t.Errorf("creating a quota: %v, want Forbidden", err)
	}
}
