package modelserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServer(t *testing.T) {
	tests := []struct {
		name      string
		behaviour Behaviour
		method    string
		path      string
		body      string
		wantCode  int
		wantBody  string
	}{
		{name: "ready", method: "GET", path: "/v2/health/ready", wantCode: 200},
		{name: "live", method: "GET", path: "/v2/health/live", wantCode: 200},
		{name: "model ready", method: "GET", path: "/v2/models/demo/ready", wantCode: 200},
		{name: "other model", method: "GET", path: "/v2/models/other/ready", wantCode: 404, wantBody: `{"error":"model \"other\" is not served here (this server serves \"demo\")"}`},
		{name: "metadata", method: "GET", path: "/v2/models/demo", wantCode: 200,
			wantBody: `{"inputs":[{"datatype":"FP64","name":"input0","shape":[-1]}],"name":"demo","outputs":[{"datatype":"FP64","name":"sum","shape":[1]}],"platform":"aisched-demo","versions":["1"]}`},
		{name: "infer", method: "POST", path: "/v2/models/demo/infer",
			body:     `{"id":"7","inputs":[{"name":"a","shape":[2,2],"datatype":"FP32","data":[1,2,3,4]},{"name":"b","shape":[1],"datatype":"INT8","data":[-0.5]}]}`,
			wantCode: 200,
			// 1+2+3+4-0.5
			wantBody: `{"model_name":"demo","model_version":"1","id":"7","outputs":[{"name":"sum","shape":[1],"datatype":"FP64","data":[9.5]}]}`},
		{name: "no inputs", method: "POST", path: "/v2/models/demo/infer", body: `{"inputs":[]}`, wantCode: 400, wantBody: `{"error":"inputs: at least one tensor is required"}`},
		{name: "sum beyond FP64", method: "POST", path: "/v2/models/demo/infer", body: `{"inputs":[{"name":"a","shape":[2],"datatype":"FP64","data":[1.7e308,1.7e308]}]}`,
			wantCode: 422, wantBody: `{"error":"the sum of the inputs is +Inf, which FP64 in JSON cannot carry"}`},
		{name: "shape against data", method: "POST", path: "/v2/models/demo/infer", body: `{"inputs":[{"name":"a","shape":[3],"datatype":"FP64","data":[1,2]}]}`,
			wantCode: 400, wantBody: `{"error":"inputs[0].data: 2 elements, shape [3] wants 3"}`},
		{name: "negative dimension", method: "POST", path: "/v2/models/demo/infer", body: `{"inputs":[{"name":"a","shape":[-1],"datatype":"FP64","data":[]}]}`,
			wantCode: 400, wantBody: `{"error":"inputs[0].shape[0]: -1 is negative"}`},
		{name: "huge shape", method: "POST", path: "/v2/models/demo/infer", body: `{"inputs":[{"name":"a","shape":[100000,100000,100000],"datatype":"FP64","data":[]}]}`,
			wantCode: 400, wantBody: `{"error":"inputs[0].shape: too many elements"}`},
		{name: "text datatype", method: "POST", path: "/v2/models/demo/infer", body: `{"inputs":[{"name":"a","shape":[1],"datatype":"BYTES","data":[1]}]}`,
			wantCode: 400, wantBody: `{"error":"inputs[0].datatype: \"BYTES\" is not a numeric datatype of the protocol"}`},
		{name: "unnamed input", method: "POST", path: "/v2/models/demo/infer", body: `{"inputs":[{"shape":[1],"datatype":"FP64","data":[1]}]}`,
			wantCode: 400, wantBody: `{"error":"inputs[0].name: required"}`},
		{name: "not JSON", method: "POST", path: "/v2/models/demo/infer", body: `{"inputs":`, wantCode: 400},
		{name: "unknown field", method: "POST", path: "/v2/models/demo/infer", body: `{"inputz":[]}`, wantCode: 400},
		{name: "wrong method", method: "GET", path: "/v2/models/demo/infer", wantCode: 405},
		{name: "unknown path", method: "GET", path: "/v1/models", wantCode: 404, wantBody: `{"error":"no such endpoint: GET /v1/models"}`},
		{name: "failing on demand", behaviour: Behaviour{FailPercent: 100}, method: "POST", path: "/v2/models/demo/infer",
			body: `{"inputs":[{"name":"a","shape":[1],"datatype":"FP64","data":[1]}]}`, wantCode: 500, wantBody: `{"error":"injected failure (demo fail percent)"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer("demo", "pod-0")
			s.SetBehaviour(tc.behaviour)
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if rec.Code != tc.wantCode {
				t.Errorf("status %d, want %d (%s)", rec.Code, tc.wantCode, rec.Body)
			}
			if tc.wantBody != "" {
				if diff := cmp.Diff(tc.wantBody, strings.TrimSpace(rec.Body.String())); diff != "" {
					t.Errorf("body (-want,+got):\n%s", diff)
				}
			}
			if rec.Header().Get("X-Aisched-Pod") != "pod-0" {
				t.Errorf("X-Aisched-Pod %q, want pod-0", rec.Header().Get("X-Aisched-Pod"))
			}
		})
	}
}

// TestServerDelay: a slow server gives up when its caller does.
func TestServerDelay(t *testing.T) {
	s := NewServer("demo", "p")
	s.SetBehaviour(Behaviour{Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req := httptest.NewRequest("POST", "/v2/models/demo/infer", strings.NewReader(`{}`)).WithContext(ctx)
	done := make(chan struct{})
	go func() {
		s.ServeHTTP(httptest.NewRecorder(), req)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the delayed request did not end with its caller")
	}
}

func FuzzInfer(f *testing.F) {
	f.Add(`{"inputs":[{"name":"a","shape":[2],"datatype":"FP64","data":[1,2]}]}`)
	f.Add(`{"inputs":[{"name":"a","shape":[9223372036854775807,9223372036854775807],"datatype":"FP64","data":[]}]}`)
	f.Add(`{"inputs":[{"name":"a","shape":[0],"datatype":"INT8","data":[]}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		s := NewServer("demo", "p")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("POST", "/v2/models/demo/infer", strings.NewReader(body)))
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d for %q, want 200 or 400", rec.Code, body)
		}
		if b, _ := io.ReadAll(rec.Body); rec.Code == 400 && !strings.Contains(string(b), `"error":`) {
			t.Fatalf("400 without an error message: %s", b)
		}
	})
}
