package gateway

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// BenchmarkGateway measures a request to the backend called directly and
// through the gateway, every control on, over real HTTP on loopback
// (client, gateway and backend in this process): what the gateway adds
// per request is the difference between the two, in ns/op, B/op and
// allocs/op.
//
//	go test -run '^$' -bench Gateway -benchtime 40000x ./pkg/gateway
//
// -cpuprofile and -memprofile profile it; `aisched bench gateway` measures
// the latency the gateway adds across processes.
func BenchmarkGateway(b *testing.B) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"model_name":"demo","outputs":[{"name":"sum","shape":[1],"datatype":"FP64","data":[10]}]}`)
	}))
	defer be.Close()
	g := New(Options{Pepper: testPepper})
	svc := utiltesting.MakeService("s", "ns", "i").APIKeys("k").
		Access(v1alpha1.AccessControl{AllowCIDRs: []string{"127.0.0.0/8"}}).
		Request(v1alpha1.RequestControl{Methods: []string{"POST"}, Paths: []string{"/v2/models/*/infer"}, MaxBodyBytes: ptr.To[int64](1 << 20), RequiredHeaders: []string{"X-Bench"}, TimeoutMilliseconds: 5000}).
		RateLimit(v1alpha1.RateLimit{QPS: ptr.To[int32](math.MaxInt32), MaxConcurrency: ptr.To[int32](100000)}).
		CircuitBreaker(v1alpha1.CircuitBreaker{Strategy: v1alpha1.ErrorRatio, ThresholdPercent: 50, MinRequests: 100, WindowSeconds: 10, OpenSeconds: 5}).Obj()
	g.Apply(published(svc, secretOf(map[string]string{"bench": "key"})), []string{strings.TrimPrefix(be.URL, "http://")})
	gw := httptest.NewServer(g)
	defer gw.Close()
	for _, tc := range []struct{ name, url string }{
		{"direct", be.URL + "/v2/models/demo/infer"},
		{"gateway", gw.URL + "/ns/s/v2/models/demo/infer"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			defer client.CloseIdleConnections()
			body := `{"inputs":[{"name":"x","shape":[4],"datatype":"FP64","data":[1,2,3,4]}]}`
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("POST", tc.url, strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer key")
					req.Header.Set("X-Bench", "1")
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
