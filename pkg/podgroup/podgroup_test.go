package podgroup

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
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
			checkRef(t, got, err, tc.want, tc.wantErr)
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

// The peers' gang forms, as their documentation writes them: Koordinator
// ("Gang Scheduling": gang.scheduling.koordinator.sh annotations), Kueue
// ("Plain Pods", pod groups), scheduler-plugins' label before v0.24 and
// Volcano's annotation.
func TestPeerGangForms(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        Ref
		wantKey     string // KeyOf; "" when the pod is in no group
		wantErr     string
	}{
		{name: "Koordinator", annotations: map[string]string{KoordinatorNameAnnotation: "gang-a", KoordinatorMinAvailableAnnotation: "3", KoordinatorWaitingTimeAnnotation: "7200s"},
			want: Ref{Namespace: "ns", Name: "gang-a", MinAvailable: 3, Timeout: 2 * time.Hour}, wantKey: "ns/gang-a"},
		{name: "Koordinator Strict", annotations: map[string]string{KoordinatorNameAnnotation: "gang-a", KoordinatorMinAvailableAnnotation: "2", KoordinatorModeAnnotation: "Strict"},
			want: Ref{Namespace: "ns", Name: "gang-a", MinAvailable: 2}, wantKey: "ns/gang-a"},
		{name: "Koordinator NonStrict", annotations: map[string]string{KoordinatorNameAnnotation: "gang-a", KoordinatorModeAnnotation: "NonStrict"},
			wantKey: "ns/gang-a", wantErr: `annotation gang.scheduling.koordinator.sh/mode="NonStrict": not supported`},
		{name: "Koordinator gang groups", annotations: map[string]string{KoordinatorNameAnnotation: "gang-a", KoordinatorGroupsAnnotation: `["ns/gang-a","ns/gang-b"]`},
			wantKey: "ns/gang-a", wantErr: `annotation gang.scheduling.koordinator.sh/groups`},
		{name: "Koordinator bad waiting time", annotations: map[string]string{KoordinatorNameAnnotation: "gang-a", KoordinatorWaitingTimeAnnotation: "soon"},
			wantKey: "ns/gang-a", wantErr: `annotation gang.scheduling.koordinator.sh/waiting-time="soon"`},
		{name: "Koordinator size without name", annotations: map[string]string{KoordinatorMinAvailableAnnotation: "2"},
			wantErr: `needs annotation gang.scheduling.koordinator.sh/name`},
		{name: "Kueue pod group", labels: map[string]string{KueueGroupNameLabel: "sample"}, annotations: map[string]string{KueueTotalCountAnnotation: "4"},
			want: Ref{Namespace: "ns", Name: "sample", MinAvailable: 4}, wantKey: "ns/sample"},
		{name: "Kueue pod group without its count", labels: map[string]string{KueueGroupNameLabel: "sample"},
			wantKey: "ns/sample", wantErr: `needs annotation kueue.x-k8s.io/pod-group-total-count`},
		{name: "two forms", labels: map[string]string{NameLabel: "a"}, annotations: map[string]string{KoordinatorNameAnnotation: "b"},
			wantKey: "ns/a", wantErr: `label pod-group.scheduling.sigs.k8s.io/name and annotation gang.scheduling.koordinator.sh/name both name a group`},
		{name: "pod form and a PodGroup", labels: map[string]string{NameLabel: "a", "scheduling.x-k8s.io/pod-group": "a"},
			wantKey: "ns/a", wantErr: `both name a group`},
		{name: "old scheduler-plugins label", labels: map[string]string{"pod-group.scheduling.sigs.k8s.io": "pg1"},
			wantKey: "ns/pg1", wantErr: `label pod-group.scheduling.sigs.k8s.io="pg1": the PodGroup CRD (scheduling.x-k8s.io) is not installed`},
		{name: "Volcano", annotations: map[string]string{VolcanoGroupAnnotation: "vc-pg"},
			wantKey: "ns/vc-pg", wantErr: `annotation scheduling.k8s.io/group-name="vc-pg": Volcano's PodGroup CRD (scheduling.volcano.sh/v1beta1) is not installed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(tc.labels)
			p.Annotations = tc.annotations
			key, ok := KeyOf(p)
			if tc.wantKey != "" && (key != tc.wantKey || !ok) || tc.wantKey == "" && ok {
				t.Errorf("KeyOf = %q, %v; want %q", key, ok, tc.wantKey)
			}
			got, ok, err := (&Groups{}).Of(p)
			if !ok {
				t.Fatal("Of: not in a group")
			}
			checkRef(t, got, err, tc.want, tc.wantErr)
		})
	}
}

// checkRef checks a group read as want, or, when wantErr is set, an error
// that contains it.
func checkRef(t *testing.T, got Ref, err error, want Ref, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error = %v, want it to contain %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// Volcano's PodGroups are read like scheduler-plugins' ones.
func TestVolcanoPodGroup(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	created := metav1.NewTime(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC))
	for name, minMember := range map[string]int64{"vc-pg": 3, "zero": 0} {
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
			"metadata": map[string]interface{}{"name": name, "namespace": "ns"},
			"spec":     map[string]interface{}{"minMember": minMember},
		}}
		u.SetCreationTimestamp(created)
		if err := indexer.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	g := &Groups{volcano: cache.NewGenericLister(indexer, VolcanoPodGroups.GroupResource())}
	for _, tc := range []struct {
		group   string
		want    Ref
		wantErr string
	}{
		{group: "vc-pg", want: Ref{Namespace: "ns", Name: "vc-pg", MinAvailable: 3, Created: created.Time,
			Volcano: map[string]interface{}{"minMember": int64(3)}}},
		{group: "zero", wantErr: "PodGroup ns/zero (scheduling.volcano.sh): spec.minMember 0: must be between 1 and 10000"},
		{group: "missing", wantErr: `annotation scheduling.k8s.io/group-name="missing": waiting for Volcano PodGroup ns/missing`},
	} {
		p := pod(nil)
		p.Annotations = map[string]string{VolcanoGroupAnnotation: tc.group}
		got, ok, err := g.Of(p)
		if !ok {
			t.Fatalf("%s: not in a group", tc.group)
		}
		checkRef(t, got, err, tc.want, tc.wantErr)
	}
}
