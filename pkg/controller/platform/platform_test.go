package platform

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

func newClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.Operator{}, &v1alpha1.OperatorInstance{}, &v1alpha1.AIService{}).Build()
}

func reconcile(t *testing.T, r interface {
	Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
}, name string) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func readyCondition(conds []metav1.Condition) string {
	c := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	if c == nil {
		return "<none>"
	}
	return string(c.Status) + " " + c.Reason + ": " + c.Message
}

func TestInstanceDeployment(t *testing.T) {
	op := utiltesting.MakeOperator("op", "ns").GPUs(2).Obj()
	op.Spec.GPU = &v1alpha1.GPUConstraints{Models: []string{"A100", "H100"}, Memory: ptr.To(resource.MustParse("40Gi")), Cores: ptr.To[int64](6912)}
	op.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/v2/health/ready"}}}
	inst := utiltesting.MakeInstance("inst", "ns", "op").Replicas(3).PodAnnotation("prometheus.io/scrape", "true").Obj()
	c := newClient(t, op, inst)
	reconcile(t, &OperatorInstanceReconciler{Client: c, DefaultSchedulerName: "aisched"}, "inst")

	var d appsv1.Deployment
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "inst"}, &d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 3 || !metav1.IsControlledBy(&d, inst) {
		t.Errorf("replicas %d, owner %v: want 3, owned by the instance", *d.Spec.Replicas, d.OwnerReferences)
	}
	tmpl := d.Spec.Template
	wantAnnotations := map[string]string{
		"prometheus.io/scrape": "true",
		gpu.ModelsAnnotation:   "A100,H100",
		gpu.MemoryAnnotation:   "40Gi",
		gpu.CoresAnnotation:    "6912",
	}
	if diff := cmp.Diff(wantAnnotations, tmpl.Annotations); diff != "" {
		t.Errorf("pod annotations (-want,+got):\n%s", diff)
	}
	if tmpl.Spec.SchedulerName != "aisched" {
		t.Errorf("schedulerName %q, want aisched", tmpl.Spec.SchedulerName)
	}
	wantLabels := map[string]string{v1alpha1.InstanceLabel: "inst", v1alpha1.OperatorLabel: "op"}
	if diff := cmp.Diff(wantLabels, tmpl.Labels); diff != "" {
		t.Errorf("pod labels (-want,+got):\n%s", diff)
	}
	ctr := tmpl.Spec.Containers[0]
	gpus := ctr.Resources.Limits[gpu.ResourceName]
	cpu := ctr.Resources.Requests[corev1.ResourceCPU]
	if gpus.Value() != 2 || cpu.String() != "100m" || ctr.Ports[0].ContainerPort != 8080 || ctr.ReadinessProbe.HTTPGet.Path != "/v2/health/ready" {
		t.Errorf("container %+v, want 2 GPUs, 100m CPU, port 8080 and the readiness probe", ctr)
	}

	// The apiserver defaults the probe; the next reconcile keeps those
	// defaults instead of fighting them (which would roll the pods).
	d.Spec.Template.Spec.Containers[0].ReadinessProbe.PeriodSeconds = 10
	d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme = corev1.URISchemeHTTP
	d.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	if err := c.Update(context.Background(), &d); err != nil {
		t.Fatal(err)
	}
	before := d.ResourceVersion
	reconcile(t, &OperatorInstanceReconciler{Client: c, DefaultSchedulerName: "aisched"}, "inst")
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "inst"}, &d); err != nil {
		t.Fatal(err)
	}
	if d.ResourceVersion != before {
		t.Errorf("an unchanged instance updated its Deployment (resourceVersion %s -> %s)", before, d.ResourceVersion)
	}
}

// A share of a card reaches the pods as the annotations GPUFit reads.
func TestInstanceDeploymentShare(t *testing.T) {
	op := utiltesting.MakeOperator("op", "ns").Obj()
	op.Spec.GPU = &v1alpha1.GPUConstraints{Milli: ptr.To[int32](300), MemoryShareMiB: ptr.To[int32](8000)}
	c := newClient(t, op, utiltesting.MakeInstance("inst", "ns", "op").Obj())
	reconcile(t, &OperatorInstanceReconciler{Client: c, DefaultSchedulerName: "aisched"}, "inst")
	var d appsv1.Deployment
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "inst"}, &d); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{gpu.MilliAnnotation: "300", gpu.GPUMemAnnotation: "8000"}
	if diff := cmp.Diff(want, d.Spec.Template.Annotations); diff != "" {
		t.Errorf("pod annotations (-want,+got):\n%s", diff)
	}
	if _, ok := d.Spec.Template.Spec.Containers[0].Resources.Limits[gpu.ResourceName]; ok {
		t.Errorf("a share asks for whole cards too: %v", d.Spec.Template.Spec.Containers[0].Resources.Limits)
	}
}

func TestInstanceStatus(t *testing.T) {
	unschedulable := func(name string, created int64) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{v1alpha1.InstanceLabel: "inst"}, CreationTimestamp: metav1.Unix(created, 0)},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: name + ": 0/8 nodes are available: 8 Insufficient nvidia.com/gpu.",
			}}},
		}
	}
	offlineOp := utiltesting.MakeOperator("op", "ns").Obj()
	offlineOp.Spec.State = v1alpha1.Offline
	offlineInst := utiltesting.MakeInstance("inst", "ns", "op").Obj()
	offlineInst.Spec.State = v1alpha1.Offline
	tests := []struct {
		name         string
		objs         []client.Object
		wantReady    string
		wantReplicas int32 // of the Deployment, -1: none
	}{
		{name: "no operator", objs: []client.Object{utiltesting.MakeInstance("inst", "ns", "op").Obj()},
			wantReady: `False OperatorNotFound: spec.operatorRef.name: operator "op" not found in namespace ns`, wantReplicas: -1},
		{name: "offline instance", objs: []client.Object{utiltesting.MakeOperator("op", "ns").Obj(), offlineInst},
			wantReady: "False Offline: the instance is offline: no pods run and their GPUs are free", wantReplicas: 0},
		{name: "offline operator", objs: []client.Object{offlineOp, utiltesting.MakeInstance("inst", "ns", "op").Obj()},
			wantReady: "False OperatorOffline: operator op is offline: no pods run and their GPUs are free", wantReplicas: 0},
		{name: "unschedulable replicas", objs: []client.Object{utiltesting.MakeOperator("op", "ns").Obj(), utiltesting.MakeInstance("inst", "ns", "op").Replicas(2).Obj(),
			unschedulable("old", 1), unschedulable("new", 2)},
			// The newest pod's message, and the count.
			wantReady: "False Unschedulable: 0 of 2 replicas ready; 2 cannot be scheduled: new: 0/8 nodes are available: 8 Insufficient nvidia.com/gpu.", wantReplicas: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, tc.objs...)
			reconcile(t, &OperatorInstanceReconciler{Client: c}, "inst")
			var inst v1alpha1.OperatorInstance
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "inst"}, &inst); err != nil {
				t.Fatal(err)
			}
			if got := readyCondition(inst.Status.Conditions); got != tc.wantReady {
				t.Errorf("Ready: %s\nwant:  %s", got, tc.wantReady)
			}
			if inst.Status.ObservedGeneration != inst.Generation || inst.Status.Selector != v1alpha1.InstanceLabel+"=inst" {
				t.Errorf("status %+v, want observedGeneration %d and the selector", inst.Status, inst.Generation)
			}
			var d appsv1.Deployment
			err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "inst"}, &d)
			switch {
			case tc.wantReplicas < 0 && err == nil:
				t.Errorf("Deployment made, want none")
			case tc.wantReplicas >= 0 && (err != nil || *d.Spec.Replicas != tc.wantReplicas):
				t.Errorf("Deployment: %v, want %d replicas", err, tc.wantReplicas)
			}
		})
	}
}

func TestServiceStatus(t *testing.T) {
	ready := func(name string) *v1alpha1.OperatorInstance {
		i := utiltesting.MakeInstance(name, "ns", "op").Obj()
		i.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReady}}
		return i
	}
	offline := ready("inst")
	offline.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonOffline, Message: "the instance is offline"}}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "svc-abc", Labels: map[string]string{v1alpha1.ServiceLabel: "svc"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			{Addresses: []string{"10.0.0.3"}}, // ready unset means ready
		},
	}
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "keys"}, Type: v1alpha1.APIKeySecretType, Data: map[string][]byte{"alice": []byte("k")}}
	emptyKeys := keys.DeepCopy()
	emptyKeys.Data = nil
	svc := func() *utiltesting.ServiceWrapper { return utiltesting.MakeService("svc", "ns", "inst") }
	tests := []struct {
		name          string
		svc           *v1alpha1.AIService
		objs          []client.Object
		wantReady     string
		wantEndpoints int32
	}{
		{name: "ready", svc: svc().Obj(), objs: []client.Object{utiltesting.MakeOperator("op", "ns").Obj(), ready("inst"), slice},
			wantReady: "True Ready: 2 ready endpoints", wantEndpoints: 2},
		{name: "kill switch first", svc: svc().KillSwitch("audit").Obj(), objs: []client.Object{slice},
			wantReady: "False KillSwitch: the kill switch is on: audit", wantEndpoints: 2},
		{name: "no instance", svc: svc().Obj(),
			wantReady: `False InstanceNotFound: spec.instanceRef.name: operator instance "inst" not found`},
		{name: "offline instance", svc: svc().Obj(), objs: []client.Object{utiltesting.MakeOperator("op", "ns").Obj(), offline},
			wantReady: "False InstanceOffline: instance inst is offline: the instance is offline"},
		{name: "port the operator does not serve", svc: func() *v1alpha1.AIService { s := svc().Obj(); s.Spec.Port = 9000; return s }(),
			objs:      []client.Object{utiltesting.MakeOperator("op", "ns").Obj(), ready("inst")},
			wantReady: "False PortNotFound: spec.port: operator op declares no container port 9000"},
		{name: "keys missing", svc: svc().APIKeys("keys").Obj(), objs: []client.Object{utiltesting.MakeOperator("op", "ns").Obj(), ready("inst"), slice},
			wantReady: `False SecretNotFound: spec.auth.secretRef.name: no Secret "keys" of type platform.aisched.io/api-keys: callers get 503`, wantEndpoints: 2},
		{name: "no key in the Secret", svc: svc().APIKeys("keys").Obj(), objs: []client.Object{utiltesting.MakeOperator("op", "ns").Obj(), ready("inst"), slice, emptyKeys},
			wantReady: "False SecretInvalid: Secret keys holds no API key: every caller gets 401", wantEndpoints: 2},
		{name: "keys", svc: svc().APIKeys("keys").Obj(), objs: []client.Object{utiltesting.MakeOperator("op", "ns").Obj(), ready("inst"), slice, keys},
			wantReady: "True Ready: 2 ready endpoints", wantEndpoints: 2},
		{name: "no endpoints", svc: svc().Obj(), objs: []client.Object{utiltesting.MakeOperator("op", "ns").Obj(), ready("inst")},
			wantReady: "False NoReadyEndpoints: no ready pod of instance inst serves port 8080"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, append(tc.objs, tc.svc)...)
			reconcile(t, &AIServiceReconciler{Client: c, GatewayURL: "http://gw:8480/"}, "svc")
			var got v1alpha1.AIService
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "svc"}, &got); err != nil {
				t.Fatal(err)
			}
			if r := readyCondition(got.Status.Conditions); r != tc.wantReady {
				t.Errorf("Ready: %s\nwant:  %s", r, tc.wantReady)
			}
			if got.Status.ReadyEndpoints != tc.wantEndpoints || got.Status.URL != "http://gw:8480/ns/svc/" || got.Status.Service != "svc" {
				t.Errorf("status %+v, want %d endpoints, URL http://gw:8480/ns/svc/ and Service svc", got.Status, tc.wantEndpoints)
			}
			var s corev1.Service
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "svc"}, &s); err != nil {
				t.Fatal(err)
			}
			if s.Spec.Type != corev1.ServiceTypeNodePort || s.Spec.Selector[v1alpha1.InstanceLabel] != "inst" || s.Labels[v1alpha1.ServiceLabel] != "svc" ||
				s.Spec.Ports[0].Port != tc.svc.Spec.Port || s.Spec.Ports[0].TargetPort.IntVal != tc.svc.Spec.Port {
				t.Errorf("Service %+v, want NodePort selecting the instance's pods on port %d", s, tc.svc.Spec.Port)
			}
		})
	}
}

// TestServiceKeepsNodePort: the node port the apiserver gave stays across
// reconciles (a new one would break callers of the old).
func TestServiceKeepsNodePort(t *testing.T) {
	svc := utiltesting.MakeService("svc", "ns", "inst").Obj()
	c := newClient(t, svc)
	r := &AIServiceReconciler{Client: c}
	reconcile(t, r, "svc")
	var s corev1.Service
	key := types.NamespacedName{Namespace: "ns", Name: "svc"}
	if err := c.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	s.Spec.Ports[0].NodePort = 31234 // as the apiserver allocates
	if err := c.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	reconcile(t, r, "svc")
	var got v1alpha1.AIService
	if err := c.Get(context.Background(), key, &got); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	if s.Spec.Ports[0].NodePort != 31234 || got.Status.NodePort != 31234 {
		t.Errorf("node port %d, status %d: want 31234 kept", s.Spec.Ports[0].NodePort, got.Status.NodePort)
	}
}

func TestServiceRefusesForeignService(t *testing.T) {
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	c := newClient(t, utiltesting.MakeService("svc", "ns", "inst").Obj(), foreign)
	_, err := (&AIServiceReconciler{Client: c}).Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "svc"}})
	if err == nil || !strings.Contains(err.Error(), "belongs to something else") {
		t.Errorf("reconcile over a foreign Service: %v, want refused", err)
	}
	var got v1alpha1.AIService
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "svc"}, &got); err != nil {
		t.Fatal(err)
	}
	if r := readyCondition(got.Status.Conditions); !strings.HasPrefix(r, "False ServiceFailed: ") {
		t.Errorf("Ready: %s, want ServiceFailed", r)
	}
}

func TestWebhookValidators(t *testing.T) {
	c := newClient(t, utiltesting.MakeOperator("op", "ns").Obj(), utiltesting.MakeInstance("inst", "ns", "op").Obj())
	iv, sv := &instanceValidator{reader: c}, &serviceValidator{reader: c}
	ctx := context.Background()
	tests := []struct {
		name    string
		call    func() error
		wantErr string
	}{
		{name: "instance of a known operator", call: func() error {
			_, err := iv.ValidateCreate(ctx, utiltesting.MakeInstance("i", "ns", "op").Obj())
			return err
		}},
		{name: "instance of an unknown operator", wantErr: `spec.operatorRef.name: Not found: "nope"`, call: func() error {
			_, err := iv.ValidateCreate(ctx, utiltesting.MakeInstance("i", "ns", "nope").Obj())
			return err
		}},
		{name: "operator of another namespace", wantErr: `spec.operatorRef.name: Not found: "op"`, call: func() error {
			_, err := iv.ValidateCreate(ctx, utiltesting.MakeInstance("i", "other", "op").Obj())
			return err
		}},
		{name: "update that keeps a lost operator", call: func() error {
			old := utiltesting.MakeInstance("i", "ns", "gone").Obj()
			_, err := iv.ValidateUpdate(ctx, old, utiltesting.MakeInstance("i", "ns", "gone").Replicas(0).Obj())
			return err
		}},
		{name: "update to an unknown operator", wantErr: `spec.operatorRef.name: Not found: "nope"`, call: func() error {
			_, err := iv.ValidateUpdate(ctx, utiltesting.MakeInstance("i", "ns", "op").Obj(), utiltesting.MakeInstance("i", "ns", "nope").Obj())
			return err
		}},
		{name: "service of an unknown instance", wantErr: `spec.instanceRef.name: Not found: "nope"`, call: func() error {
			_, err := sv.ValidateCreate(ctx, utiltesting.MakeService("s", "ns", "nope").Obj())
			return err
		}},
		{name: "bad path pattern on update", wantErr: `spec.request.paths[1]: Invalid value: "/a/[": not a path pattern: syntax error in pattern`, call: func() error {
			s := utiltesting.MakeService("s", "ns", "inst").Request(v1alpha1.RequestControl{Paths: []string{"/ok/*", "/a/["}}).Obj()
			_, err := sv.ValidateUpdate(ctx, utiltesting.MakeService("s", "ns", "inst").Obj(), s)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
