package platform

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// TestWebhookManifest keeps deploy/platform/webhook.yaml, which a real
// cluster applies, the same as ValidatingWebhooks, which `aisched up`
// registers.
func TestWebhookManifest(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "platform", "webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(data, &got); err != nil {
		t.Fatal(err)
	}
	want := ValidatingWebhooks(func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: "aisched-system", Name: "aisched-controller", Path: &path,
		}}
	})
	if got.Name != WebhookConfigurationName {
		t.Errorf("name %q, want %q", got.Name, WebhookConfigurationName)
	}
	if diff := cmp.Diff(want, got.Webhooks); diff != "" {
		t.Errorf("deploy/platform/webhook.yaml differs from ValidatingWebhooks (-want,+got):\n%s", diff)
	}
}
