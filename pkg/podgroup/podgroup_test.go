package podgroup

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: labels}}
}

func TestFromPod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		want    Ref
		wantOK  bool
		wantErr string
	}{
		{name: "no group", labels: map[string]string{"app": "x"}},
		{name: "strict gang", labels: map[string]string{NameLabel: "tf", MinAvailableLabel: "5"},
			want: Ref{Namespace: "ns", Name: "tf", MinAvailable: 5}, wantOK: true},
		{name: "name only means 1", labels: map[string]string{NameLabel: "tf"},
			want: Ref{Namespace: "ns", Name: "tf", MinAvailable: 1}, wantOK: true},
		{name: "zero", labels: map[string]string{NameLabel: "tf", MinAvailableLabel: "0"}, wantOK: true,
			wantErr: `label pod-group.scheduling.sigs.k8s.io/min-available="0": must be between 1 and 10000`},
		{name: "negative", labels: map[string]string{NameLabel: "tf", MinAvailableLabel: "-3"}, wantOK: true,
			wantErr: `min-available="-3": must be between 1 and 10000`},
		{name: "too large", labels: map[string]string{NameLabel: "tf", MinAvailableLabel: "100000"}, wantOK: true,
			wantErr: `min-available="100000": must be between 1 and 10000`},
		{name: "not a number", labels: map[string]string{NameLabel: "tf", MinAvailableLabel: "five"}, wantOK: true,
			wantErr: `min-available="five": not a whole number`},
		{name: "min without name", labels: map[string]string{MinAvailableLabel: "2"}, wantOK: true,
			wantErr: `needs label pod-group.scheduling.sigs.k8s.io/name`},
		{name: "bad name", labels: map[string]string{NameLabel: "Tf_1", MinAvailableLabel: "2"}, wantOK: true,
			wantErr: `label pod-group.scheduling.sigs.k8s.io/name="Tf_1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := FromPod(pod(tc.labels))
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzFromPod(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "10001", "abc", "", " 3", "9999999999999999999999"} {
		f.Add("group", s)
	}
	f.Fuzz(func(t *testing.T, name, minAvailable string) {
		ref, ok, err := FromPod(pod(map[string]string{NameLabel: name, MinAvailableLabel: minAvailable}))
		if !ok {
			t.Fatal("a pod with both labels is in a group")
		}
		if err == nil && (ref.MinAvailable < 1 || ref.MinAvailable > MaxMinAvailable || ref.Name != name) {
			t.Fatalf("accepted %+v", ref)
		}
	})
}

// A pod of the native Workload API is the upstream GangScheduling
// plugin's, whatever group labels it carries.
func TestNativeWorkloadPodsAreNotOurs(t *testing.T) {
	p := pod(map[string]string{NameLabel: "tf", MinAvailableLabel: "2"})
	p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{}
	if _, ok, err := FromPod(p); ok || err != nil {
		t.Errorf("FromPod: ok %v, err %v; want not in a group", ok, err)
	}
	if _, ok := KeyOf(p); ok {
		t.Error("KeyOf: ok; want not in a group")
	}
	if _, ok, err := (&Groups{}).Of(p); ok || err != nil {
		t.Errorf("Groups.Of: ok %v, err %v; want not in a group", ok, err)
	}
}
