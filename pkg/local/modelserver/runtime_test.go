package modelserver

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func demoPod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "uid-" + "name", Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "model", Image: DemoImage + ":v1",
			Env:   []corev1.EnvVar{{Name: ModelNameEnv, Value: "m"}},
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		}}},
	}
}

// get calls the pod at podIP:8080 through the runtime's dialer, as the
// gateway of `aisched up` does.
func get(t *testing.T, r *Runtime, podIP, path string) (*http.Response, string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: r.DialContext}}
	resp, err := client.Get("http://" + net.JoinHostPort(podIP, "8080") + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestRuntime(t *testing.T) {
	ctx := context.Background()
	r := NewRuntime()
	defer r.Close()
	// A second runtime (another cluster in this process, or another
	// aisched up) holds the first addresses: this one must skip them.
	other := NewRuntime()
	defer other.Close()
	if err := other.Run(ctx, demoPod("theirs", nil), "10.0.0.9"); err != nil {
		t.Fatal(err)
	}

	if err := r.Run(ctx, demoPod("a", nil), "10.1.0.2"); err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx, demoPod("b", map[string]string{FailPercentAnnotation: "100"}), "10.1.0.3"); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, r, "10.1.0.2", "/v2/models/m/ready")
	if resp.StatusCode != 200 || resp.Header.Get("X-Aisched-Pod") != "a" {
		t.Errorf("pod a: %d %v %s, want 200 from pod a", resp.StatusCode, resp.Header, body)
	}
	if resp, body := get(t, r, "10.1.0.3", "/v2/models/m/ready"); resp.Header.Get("X-Aisched-Pod") != "b" {
		t.Errorf("pod b: %d %v %s, want pod b", resp.StatusCode, resp.Header, body)
	}
	// The annotations apply on the next Run (a pod update).
	client := &http.Client{Transport: &http.Transport{DialContext: r.DialContext}}
	infer := func(ip string) int {
		resp, err := client.Post("http://"+ip+":8080/v2/models/m/infer", "application/json",
			strings.NewReader(`{"inputs":[{"name":"a","shape":[1],"datatype":"FP64","data":[1]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := infer("10.1.0.3"); code != 500 {
		t.Errorf("pod b failing 100%%: %d, want 500", code)
	}
	if err := r.Run(ctx, demoPod("b", nil), "10.1.0.3"); err != nil {
		t.Fatal(err)
	}
	if code := infer("10.1.0.3"); code != 200 {
		t.Errorf("pod b healed: %d, want 200", code)
	}

	r.Stop("ns/a")
	if _, err := r.DialContext(ctx, "tcp", "10.1.0.2:8080"); err == nil {
		t.Error("dial to stopped pod a succeeded")
	}
	// A stopped pod's address is free for the next.
	if err := r.Run(ctx, demoPod("c", nil), "10.1.0.4"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, r, "10.1.0.4", "/v2/health/ready"); resp.StatusCode != 200 {
		t.Errorf("pod c: %d, want 200", resp.StatusCode)
	}
}

func TestRuntimeBadPods(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	tests := []struct {
		name    string
		pod     *corev1.Pod
		wantErr string
	}{
		{name: "fail percent", pod: demoPod("p", map[string]string{FailPercentAnnotation: "101"}), wantErr: "annotation demo.aisched.io/fail-percent: \"101\" is not a percentage from 0 to 100"},
		{name: "delay", pod: demoPod("p", map[string]string{DelayAnnotation: "soon"}), wantErr: "annotation demo.aisched.io/delay: \"soon\" is not a duration from 0 to 1h"},
		{name: "no ports", pod: func() *corev1.Pod { p := demoPod("p", nil); p.Spec.Containers[0].Ports = nil; return p }(), wantErr: "container model: image ghcr.io/aisched/demo-model serves on its ports, and it has none"},
	}
	for _, tc := range tests {
		if err := r.Run(context.Background(), tc.pod, "10.0.0.1"); err == nil || err.Error() != tc.wantErr {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	// Pods of other images are not the runtime's.
	other := demoPod("x", nil)
	other.Spec.Containers[0].Image = "ghcr.io/aisched/demo-model-other:v1"
	if err := r.Run(context.Background(), other, "10.0.0.1"); err != nil {
		t.Errorf("other image: %v, want nothing done", err)
	}
	if len(r.pods) != 0 {
		t.Errorf("%d pods run, want 0", len(r.pods))
	}
}
