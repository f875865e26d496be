package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/controller/platform"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/util/certs"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
	"github.com/aisched/aisched/pkg/webhook/schedulername"
)

// TestAssignScheduler registers the chart's MutatingWebhookConfiguration,
// pointed at schedulername's handlers served here over TLS, and lets the
// apiserver call them: every pod of an opted-in namespace and GPU pods
// elsewhere go to aisched, which then places the share on a card; CPU
// pods elsewhere, pods that name another scheduler, opted-out pods and
// kube-system's keep the scheduler they name.
func TestAssignScheduler(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - name: t4
    count: 1
    cpu: "16"
    memory: 64Gi
    gpus: {count: 2, model: Tesla-T4, memoryMiB: 15360}
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The chart's configuration is schedulername.Webhooks for its values.
	objs := decodeManifests(t, renderChart(t, "--set", "controller.webhook.assignScheduler.enabled=true",
		"--set", "controller.webhook.assignScheduler.gpuPods=true", "--show-only", "templates/platform/assign-scheduler.yaml"))
	if len(objs) != 1 {
		t.Fatalf("the chart's assign-scheduler configuration: %d objects, want 1", len(objs))
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(objs[0].Object, &cfg, true); err != nil {
		t.Fatal(err)
	}
	want := schedulername.Webhooks(schedulername.Options{
		SchedulerName:      scheduler.AischedProfile,
		NamespaceSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{schedulername.Label: "true"}},
		GPUPods:            true,
		ExcludedNamespaces: []string{"kube-system", systemNamespace},
		FailurePolicy:      admissionregistrationv1.Ignore,
		TimeoutSeconds:     5,
	}, controllerService)
	if cfg.Name != schedulername.ConfigurationName {
		t.Errorf("configuration %q, want %q", cfg.Name, schedulername.ConfigurationName)
	}
	if diff := cmp.Diff(want, cfg.Webhooks); diff != "" {
		t.Errorf("the chart's webhooks differ from schedulername.Webhooks (-want,+got):\n%s", diff)
	}

	// The handlers, over TLS, as the controller serves them.
	leaf, key, caCert := servingCert(t, &x509.Certificate{Subject: pkix.Name{CommonName: "webhook"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}})
	serving := &tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := platform.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- platform.ServeWebhooks(ctx, l, func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return serving, nil },
			schedulername.Handlers(scheme, scheduler.AischedProfile))
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	}()
	for i := range cfg.Webhooks {
		url := "https://" + l.Addr().String() + *cfg.Webhooks[i].ClientConfig.Service.Path
		cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: certs.EncodeCert(caCert)}
		// Fail, so that a webhook error shows here instead of a pod
		// passing by.
		cfg.Webhooks[i].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	}
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	in := createNamespace(t, c.Client)
	nsObj, err := c.Client.CoreV1().Namespaces().Get(ctx, in, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels[schedulername.Label] = "true"
	if _, err := c.Client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := createNamespace(t, c.Client)
	// admitted creates pod with a dry run and returns it as admission left it.
	admitted := func(pod *corev1.Pod) *corev1.Pod {
		t.Helper()
		got, err := c.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
		return got
	}
	cpuPod := func(ns, name string) *utiltesting.PodWrapper {
		return utiltesting.MakePod(name, ns).Req(corev1.ResourceCPU, "100m")
	}
	// The apiserver loads a new configuration within a few seconds.
	localtest.Eventually(t, 30*time.Second, "the webhook called", func(context.Context) (bool, error) {
		return admitted(cpuPod(in, "probe").Obj()).Spec.SchedulerName == scheduler.AischedProfile, nil
	})

	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		want, why string
	}{
		{name: "opted-in namespace", pod: cpuPod(in, "cpu").Obj(), want: scheduler.AischedProfile, why: "namespace"},
		{name: "other namespace, CPU", pod: cpuPod(out, "cpu").Obj(), want: corev1.DefaultSchedulerName},
		{name: "other namespace, cards", pod: cpuPod(out, "cards").GPU(1).Obj(), want: scheduler.AischedProfile, why: "gpu"},
		{name: "other namespace, names its scheduler", pod: cpuPod(out, "volcano").GPU(1).SchedulerName("volcano").Obj(), want: "volcano"},
		{name: "other namespace, opted out", pod: cpuPod(out, "optout").GPU(1).Label(schedulername.Label, "false").Obj(), want: corev1.DefaultSchedulerName},
		{name: "opted-in namespace, opted out", pod: cpuPod(in, "optout").Label(schedulername.Label, "false").Obj(), want: corev1.DefaultSchedulerName},
		{name: "kube-system", pod: cpuPod("kube-system", "cards").GPU(1).Obj(), want: corev1.DefaultSchedulerName},
	} {
		got := admitted(tc.pod)
		if got.Spec.SchedulerName != tc.want || got.Annotations[schedulername.AssignedAnnotation] != tc.why {
			t.Errorf("%s: scheduler %q (%s=%q), want %q (%q)", tc.name, got.Spec.SchedulerName,
				schedulername.AssignedAnnotation, got.Annotations[schedulername.AssignedAnnotation], tc.want, tc.why)
		}
	}

	// A share written without schedulerName is placed by aisched on a card.
	share := cpuPod(out, "share").Annotation(gpu.MilliAnnotation, "500").Obj()
	createPods(t, c, share)
	waitRunning(t, c, out, "share")
	got, err := c.Client.CoreV1().Pods(out).Get(ctx, "share", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.SchedulerName != scheduler.AischedProfile || got.Annotations[gpu.AssignedAnnotation] == "" {
		t.Errorf("share: scheduler %q, card %q, want aisched to have given it a card", got.Spec.SchedulerName, got.Annotations[gpu.AssignedAnnotation])
	}
}
