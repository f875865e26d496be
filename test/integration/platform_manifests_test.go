package integration

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/keyutil"

	platformv1alpha1 "github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/controller/platform"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/util/certs"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
	"github.com/aisched/aisched/pkg/webhook/schedulername"
)

// TestPlatformManifests runs `aisched controller` and `aisched gateway` as
// processes of their own, as the Helm chart ships them, each with only the
// permissions of its ServiceAccount, against a cluster that runs no
// platform of its own: the manifests apply; the controller takes its
// leader lease, makes its webhook certificate, puts the CA into the
// webhook configuration, reconciles and answers admission reviews over TLS
// as the apiserver would call it; the gateway loads the routes and serves.
func TestPlatformManifests(t *testing.T) {
	t.Parallel()
	c := localtest.Start(t, local.Options{})
	ctx := context.Background()
	// The webhook's configuration comes after the objects below.
	components := append(onlyComponents("controller", "gateway"), "--set", "controller.webhook.assignScheduler.enabled=true")
	var rest []string
	for _, f := range []string{"controller-rbac.yaml", "controller.yaml", "gateway-rbac.yaml", "gateway.yaml"} {
		rest = append(rest, "--show-only", "templates/platform/"+f)
	}
	installChart(t, c, renderChart(t, append(components, rest...)...))
	waitDeploymentAvailable(t, c.Client, "aisched-system", "aisched-controller", 2)
	waitDeploymentAvailable(t, c.Client, "aisched-system", "aisched-gateway", 2)

	// The objects come first: the apiserver of this test cannot reach the
	// webhook's Service (no kube-proxy), so the webhook is called directly
	// below.
	ns := createNamespace(t, c.Client)
	api := versioned.NewForConfigOrDie(c.Config).PlatformV1alpha1()
	if _, err := api.Operators(ns).Create(ctx, utiltesting.MakeOperator("demo", ns).Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.OperatorInstances(ns).Create(ctx, utiltesting.MakeInstance("demo", ns, "demo").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.AIServices(ns).Create(ctx, utiltesting.MakeService("off", ns, "demo").KillSwitch("closed for the test").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	webhookConfig := renderChart(t, append(components, "--show-only", "templates/platform/webhook.yaml")...)
	checkWebhookConfiguration(t, webhookConfig)
	applyManifests(t, c, webhookConfig, false)
	applyManifests(t, c, renderChart(t, append(components, "--show-only", "templates/platform/assign-scheduler.yaml")...), false)

	webhookPort, healthPort, gatewayPort, adminPort := freePort(t), freePort(t), freePort(t), freePort(t)
	controller := startCommand(t, nil, "controller",
		"--kubeconfig", serviceAccountKubeconfig(t, c, "aisched-system", "aisched-controller"),
		"--namespace", "aisched-system",
		"--gateway-url", "http://gateway.example:8480",
		"--webhook-port", strconv.Itoa(webhookPort),
		"--assign-scheduler",
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(healthPort))
	gateway := startCommand(t, nil, "gateway",
		"--kubeconfig", serviceAccountKubeconfig(t, c, "aisched-system", "aisched-gateway"),
		"--bind-address", "127.0.0.1:"+strconv.Itoa(gatewayPort),
		"--admin-bind-address", "127.0.0.1:"+strconv.Itoa(adminPort))

	// The controller: lease, certificate, CA bundle, reconciled objects.
	localtest.Eventually(t, time.Minute, "the controller's leader lease", func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoordinationV1().Leases("aisched-system").Get(ctx, "aisched-controller", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", err
	})
	var ca []byte
	localtest.Eventually(t, time.Minute, "the webhook's CA in its configuration", func(ctx context.Context) (bool, error) {
		s, err := c.Client.CoreV1().Secrets("aisched-system").Get(ctx, "aisched-controller-webhook-tls", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ca = s.Data["ca.crt"]
		cfg, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "aisched-platform", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, w := range cfg.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, ca) {
				return false, fmt.Errorf("webhook %s has no CA bundle yet", w.Name)
			}
		}
		assign, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, schedulername.ConfigurationName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, w := range assign.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, ca) {
				return false, fmt.Errorf("webhook %s has no CA bundle yet", w.Name)
			}
		}
		return len(ca) > 0, nil
	})
	localtest.Eventually(t, time.Minute, "the AIService reconciled", func(ctx context.Context) (bool, error) {
		s, err := api.AIServices(ns).Get(ctx, "off", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return s.Status.URL == "http://gateway.example:8480/"+ns+"/off/" && s.Status.NodePort > 0 && serviceReason(platformv1alpha1.ReasonKillSwitch)(s),
			fmt.Errorf("status %+v", s.Status)
	})
	waitDeploymentAvailable(t, c.Client, ns, "demo", 1)
	if code := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)); code != 200 {
		t.Errorf("controller /readyz: %d, want 200", code)
	}

	// The webhook, over TLS with the CA the apiserver was given, for the
	// name of the Service the apiserver calls.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	webhook := webhookClient(pool)
	instanceURL := fmt.Sprintf("https://127.0.0.1:%d/validate-platform-aisched-io-v1alpha1-operatorinstance", webhookPort)
	if r := reviewInstance(t, webhook, instanceURL, utiltesting.MakeInstance("good", ns, "demo").Obj()); !r.Allowed {
		t.Errorf("instance of an existing operator: %+v, want allowed", r.Result)
	}
	if r := reviewInstance(t, webhook, instanceURL, utiltesting.MakeInstance("bad", ns, "nope").Obj()); r.Allowed || r.Result == nil || !strings.Contains(r.Result.Message, "spec.operatorRef.name: Not found") {
		t.Errorf("instance of an unknown operator: allowed %v, %+v, want refused naming spec.operatorRef.name", r.Allowed, r.Result)
	}
	// --assign-scheduler: a GPU pod gets aisched.
	gpuPod := utiltesting.MakePod("cards", ns).GPU(1).Obj()
	r := admissionReview(t, webhook, fmt.Sprintf("https://127.0.0.1:%d/mutate-v1-pod-scheduler-name-gpu", webhookPort),
		metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, ns, gpuPod.Name, gpuPod)
	if !r.Allowed || !strings.Contains(string(r.Patch), `"/spec/schedulerName","value":"aisched"`) {
		t.Errorf("GPU pod: allowed %v, patch %s, want schedulerName aisched", r.Allowed, r.Patch)
	}

	// A replica that reads its certificate from --webhook-cert-dir, as
	// with cert-manager, serves it and takes a renewed one.
	certDir := t.TempDir()
	ca1 := writeServingCert(t, certDir, "aisched-controller.aisched-system.svc")
	certPort := freePort(t)
	standby := startCommand(t, nil, "controller",
		"--kubeconfig", serviceAccountKubeconfig(t, c, "aisched-system", "aisched-controller"),
		"--namespace", "aisched-system",
		"--webhook-port", strconv.Itoa(certPort),
		"--webhook-cert-dir", certDir,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0")
	certURL := fmt.Sprintf("https://127.0.0.1:%d/validate-platform-aisched-io-v1alpha1-operatorinstance", certPort)
	localtest.Eventually(t, time.Minute, "the webhook with cert-manager's certificate", func(context.Context) (bool, error) {
		_, err := webhookClient(ca1).Get(certURL)
		return err == nil, err
	})
	if r := reviewInstance(t, webhookClient(ca1), certURL, utiltesting.MakeInstance("bad", ns, "nope").Obj()); r.Allowed {
		t.Errorf("instance of an unknown operator, through the second replica: allowed, want refused")
	}
	ca2 := writeServingCert(t, certDir, "aisched-controller.aisched-system.svc")
	localtest.Eventually(t, time.Minute, "the renewed certificate served", func(context.Context) (bool, error) {
		_, err := webhookClient(ca2).Get(certURL)
		return err == nil, err
	})

	// The gateway, with its routes loaded.
	localtest.Eventually(t, time.Minute, "the gateway ready", func(context.Context) (bool, error) {
		return httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", adminPort)) == 200, nil
	})
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/%s/off/v2/health/ready", gatewayPort, ns))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "closed for the test") {
		t.Errorf("gateway: %d %s, want 503 with the kill switch's reason", resp.StatusCode, b)
	}

	for name, p := range map[string]*command{"controller": controller, "standby controller": standby, "gateway": gateway} {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		stopCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		if err := p.wait(stopCtx); err != nil {
			t.Errorf("%s after SIGTERM: %v, want a clean exit", name, err)
		}
		cancel()
	}
}

// httpGet returns the status of a GET, 0 when it failed.
func httpGet(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// checkWebhookConfiguration compares the chart's webhook configuration,
// which a real cluster applies, with platform.ValidatingWebhooks, which
// `aisched up` registers.
func checkWebhookConfiguration(t *testing.T, manifests []byte) {
	t.Helper()
	objs := decodeManifests(t, manifests)
	if len(objs) != 1 {
		t.Fatalf("the chart's webhook configuration: %d objects, want 1", len(objs))
	}
	var got admissionregistrationv1.ValidatingWebhookConfiguration
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(objs[0].Object, &got, true); err != nil {
		t.Fatal(err)
	}
	want := platform.ValidatingWebhooks(controllerService)
	if got.Name != platform.WebhookConfigurationName {
		t.Errorf("webhook configuration %q, want %q", got.Name, platform.WebhookConfigurationName)
	}
	if diff := cmp.Diff(want, got.Webhooks); diff != "" {
		t.Errorf("the chart's webhooks differ from platform.ValidatingWebhooks (-want,+got):\n%s", diff)
	}
}

// webhookClient calls the webhook over TLS as the apiserver does: trusting
// pool, for the name of the controller's Service.
func webhookClient(pool *x509.CertPool) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "aisched-controller.aisched-system.svc"},
		// A new handshake each call: certificates change under the test.
		DisableKeepAlives: true,
	}}
}

// reviewInstance sends the creation of inst to the webhook at url.
func reviewInstance(t *testing.T, client *http.Client, url string, inst *platformv1alpha1.OperatorInstance) *admissionv1.AdmissionResponse {
	t.Helper()
	return admissionReview(t, client, url,
		metav1.GroupVersionKind{Group: platformv1alpha1.GroupName, Version: "v1alpha1", Kind: "OperatorInstance"},
		metav1.GroupVersionResource{Group: platformv1alpha1.GroupName, Version: "v1alpha1", Resource: "operatorinstances"},
		inst.Namespace, inst.Name, inst)
}

// admissionReview sends the creation of obj to the webhook at url, as the
// apiserver would, and returns the answer.
func admissionReview(t *testing.T, client *http.Client, url string, kind metav1.GroupVersionKind, resource metav1.GroupVersionResource, namespace, name string, obj any) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("review-" + name), Kind: kind, Resource: resource,
			Namespace: namespace, Name: name, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("admission review: %v", err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		t.Fatalf("admission review answer: %v %+v", err, out)
	}
	return out.Response
}

// writeServingCert writes tls.crt and tls.key for host into dir, signed by
// a new CA, as cert-manager renews a mounted Secret (each file replaced
// whole), and returns a pool of that CA.
func writeServingCert(t *testing.T, dir, host string) *x509.CertPool {
	t.Helper()
	leaf, key, caCert := servingCert(t, &x509.Certificate{Subject: pkix.Name{CommonName: host}, DNSNames: []string{host}})
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{corev1.TLSPrivateKeyKey: keyPEM, corev1.TLSCertKey: certs.EncodeCert(leaf)} {
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool
}

// servingCert signs a serving certificate for the names of tmpl with a
// new CA, and returns it, its key and the CA.
func servingCert(t *testing.T, tmpl *x509.Certificate) (*x509.Certificate, crypto.Signer, *x509.Certificate) {
	t.Helper()
	caCert, caKey, err := certs.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	leaf, key, err := certs.SignLeaf(tmpl, caCert, caKey, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return leaf, key, caCert
}

// controllerService is how the chart's webhook configurations reach the
// controller: its Service, at path.
func controllerService(path string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
		Namespace: systemNamespace, Name: "aisched-controller", Path: &path,
	}}
}
