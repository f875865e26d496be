package platform

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/keyutil"

	"github.com/aisched/aisched/pkg/util/certs"
)

func TestWebhookCerts(t *testing.T) {
	ctx := context.Background()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: WebhookConfigurationName},
		Webhooks: ValidatingWebhooks(func(path string) admissionregistrationv1.WebhookClientConfig {
			return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "sys", Name: "ctl", Path: &path}}
		}),
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "assign"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "a.example.com"}, {Name: "b.example.com"}},
	}
	client := fake.NewClientset(vwc, mwc)
	newCerts := func() *WebhookCerts {
		return &WebhookCerts{Client: client, Namespace: "sys", Service: "ctl", Secret: "ctl-tls", Configuration: WebhookConfigurationName, MutatingConfiguration: "assign"}
	}
	a := newCerts()
	now := time.Now()
	if err := a.ensure(ctx, now); err != nil {
		t.Fatal(err)
	}
	secret, err := client.CoreV1().Secrets("sys").Get(ctx, "ctl-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := secret.Data["ca.crt"]
	leaf := parseLeaf(t, a)
	if err := leaf.VerifyHostname("ctl.sys.svc"); err != nil {
		t.Errorf("certificate names: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "ctl.sys.svc"}); err != nil {
		t.Errorf("certificate not signed by the Secret's CA: %v", err)
	}
	got, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, WebhookConfigurationName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range got.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, ca) {
			t.Errorf("webhook %s caBundle not the Secret's CA", w.Name)
		}
	}
	gotMutating, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "assign", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range gotMutating.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, ca) {
			t.Errorf("mutating webhook %s caBundle not the Secret's CA", w.Name)
		}
	}

	// A second replica serves the same certificate.
	b := newCerts()
	if err := b.ensure(ctx, now); err != nil {
		t.Fatal(err)
	}
	if !parseLeaf(t, b).Equal(leaf) {
		t.Error("second replica made its own certificate, want the Secret's")
	}

	// Eleven months on, the certificate is renewed under the same CA, so
	// the caBundle the apiserver holds stays valid.
	later := now.Add(335 * 24 * time.Hour)
	if err := a.ensure(ctx, later); err != nil {
		t.Fatal(err)
	}
	renewed := parseLeaf(t, a)
	if renewed.Equal(leaf) || !renewed.NotAfter.After(leaf.NotAfter) {
		t.Errorf("certificate ending %s not renewed (now ends %s)", leaf.NotAfter, renewed.NotAfter)
	}
	secret, _ = client.CoreV1().Secrets("sys").Get(ctx, "ctl-tls", metav1.GetOptions{})
	if !bytes.Equal(secret.Data["ca.crt"], ca) {
		t.Error("renewal replaced the CA, want the same CA (10 years)")
	}
	if _, err := renewed.Verify(x509.VerifyOptions{Roots: pool, DNSName: "ctl.sys.svc", CurrentTime: later}); err != nil {
		t.Errorf("renewed certificate: %v", err)
	}

	// A Secret with garbage is replaced, not served.
	secret.Data[corev1.TLSCertKey] = []byte("garbage")
	if _, err := client.CoreV1().Secrets("sys").Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.ensure(ctx, later); err != nil {
		t.Fatalf("ensure over a garbled Secret: %v", err)
	}
	if _, err := a.GetCertificate(nil); err != nil {
		t.Error(err)
	}
}

func parseLeaf(t *testing.T, w *WebhookCerts) *x509.Certificate {
	t.Helper()
	c, err := w.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// TestServingCertificate: the certificate of a directory's files, or the
// one WebhookCerts issue into their Secret; nothing when the context ends
// before one is there.
func TestServingCertificate(t *testing.T) {
	// A regression that never has a certificate fails at the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ca, caKey, err := certs.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, key, err := certs.SignLeaf(&x509.Certificate{DNSNames: []string{"ctl.sys.svc"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{corev1.TLSCertKey: certs.EncodeCert(leaf), corev1.TLSPrivateKeyKey: keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	get, err := ServingCertificate(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := get(nil); err != nil || c == nil || !bytes.Equal(c.Certificate[0], leaf.Raw) {
		t.Errorf("from the directory: %v, want its certificate", err)
	}
	if _, err := ServingCertificate(ctx, t.TempDir(), nil); err == nil {
		t.Error("an empty directory: no error")
	}

	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: WebhookConfigurationName}}
	kept := &WebhookCerts{Client: fake.NewClientset(vwc), Namespace: "sys", Service: "ctl", Secret: "ctl-tls", Configuration: WebhookConfigurationName}
	get, err = ServingCertificate(ctx, "", kept)
	if err != nil || get == nil {
		t.Fatalf("kept in the Secret: no certificate within 30s (%v)", err)
	}
	c, err := get(nil)
	if err != nil || c == nil {
		t.Fatalf("kept in the Secret: %v, %v", c, err)
	}
	secret, err := kept.Client.CoreV1().Secrets("sys").Get(ctx, "ctl-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(secret.Data[corev1.TLSCertKey], certs.EncodeCert(mustParse(t, c.Certificate[0]))) {
		t.Error("the certificate served is not the Secret's")
	}

	ended, end := context.WithCancel(ctx)
	end()
	// A client whose every request fails: no certificate ever.
	failing := fake.NewClientset()
	failing.PrependReactor("*", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver down")
	})
	if get, err := ServingCertificate(ended, "", &WebhookCerts{Client: failing, Namespace: "sys", Service: "ctl", Secret: "ctl-tls"}); get != nil || err != nil {
		t.Errorf("the context ended first: %v, %v, want nil, nil", get != nil, err)
	}
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
