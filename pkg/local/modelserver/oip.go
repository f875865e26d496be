package modelserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"
)

// Behaviour makes a server fail or be slow on demand, so that the
// gateway's breakers and timeouts can be tested.
type Behaviour struct {
	// FailPercent of inference requests get 500.
	FailPercent int
	// Delay is added before every inference answer.
	Delay time.Duration
}

// Server is one model server: the model Name that sums its inputs.
type Server struct {
	// Name is the model's name in the URL paths.
	Name string
	// Pod answers in the X-Aisched-Pod header, so callers see which replica answered.
	Pod       string
	behaviour atomic.Pointer[Behaviour]
	mux       *http.ServeMux
}

// NewServer returns a server of the model name.
func NewServer(name, pod string) *Server {
	s := &Server{Name: name, Pod: pod}
	s.behaviour.Store(&Behaviour{})
	s.mux = s.newMux()
	return s
}

// SetBehaviour changes how the server fails and how slow it is.
func (s *Server) SetBehaviour(b Behaviour) { s.behaviour.Store(&b) }

// Tensor is an OIP v2 tensor; data is flat, in row-major order.
type Tensor struct {
	Name     string    `json:"name"`
	Shape    []int64   `json:"shape"`
	Datatype string    `json:"datatype"`
	Data     []float64 `json:"data"`
}

// InferRequest is the body of POST /v2/models/{name}/infer.
type InferRequest struct {
	ID      string   `json:"id,omitempty"`
	Inputs  []Tensor `json:"inputs"`
	Outputs []struct {
		Name string `json:"name"`
	} `json:"outputs,omitempty"`
}

// InferResponse is the answer: one output, "sum", the sum of every input element.
type InferResponse struct {
	ModelName    string   `json:"model_name"`
	ModelVersion string   `json:"model_version,omitempty"`
	ID           string   `json:"id,omitempty"`
	Outputs      []Tensor `json:"outputs"`
}

// maxInferBody bounds an inference request.
const maxInferBody = 8 << 20

// numeric are the OIP v2 datatypes the demo model adds up.
var numeric = map[string]bool{
	"BOOL": true, "UINT8": true, "UINT16": true, "UINT32": true, "UINT64": true,
	"INT8": true, "INT16": true, "INT32": true, "INT64": true, "FP16": true, "FP32": true, "FP64": true,
}

// ServeHTTP serves the OIP v2 REST endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Aisched-Pod", s.Pod)
	s.mux.ServeHTTP(w, r)
}

// newMux routes the protocol's endpoints. Each path also answers the
// other methods with 405, and any other path with 404, as JSON errors.
func (s *Server) newMux() *http.ServeMux {
	mux := http.NewServeMux()
	handle := func(method, path string, h http.HandlerFunc) {
		mux.HandleFunc(method+" "+path, h)
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s: %s takes %s", r.Method, r.URL.Path, method))
		})
	}
	handle("GET", "/v2", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"name": "aisched-demo", "version": "1", "extensions": []string{}})
	})
	handle("GET", "/v2/health/live", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	handle("GET", "/v2/health/ready", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	handle("GET", "/v2/models/{name}", s.model(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"name": s.Name, "versions": []string{"1"}, "platform": "aisched-demo",
			"inputs":  []map[string]any{{"name": "input0", "datatype": "FP64", "shape": []int{-1}}},
			"outputs": []map[string]any{{"name": "sum", "datatype": "FP64", "shape": []int{1}}},
		})
	}))
	handle("GET", "/v2/models/{name}/ready", s.model(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	handle("POST", "/v2/models/{name}/infer", s.model(s.infer))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// model answers 404 for another model's name.
func (s *Server) model(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if name := r.PathValue("name"); name != s.Name {
			writeError(w, http.StatusNotFound, fmt.Sprintf("model %q is not served here (this server serves %q)", name, s.Name))
			return
		}
		next(w, r)
	}
}

func (s *Server) infer(w http.ResponseWriter, r *http.Request) {
	b := s.behaviour.Load()
	if b.Delay > 0 {
		select {
		case <-time.After(b.Delay):
		case <-r.Context().Done():
			// The caller left, or the server stops: a caller still there
			// is told so rather than given an empty answer.
			writeError(w, http.StatusServiceUnavailable, "the model server is stopping")
			return
		}
	}
	if b.FailPercent > 0 && rand.IntN(100) < b.FailPercent {
		writeError(w, http.StatusInternalServerError, "injected failure (demo fail percent)")
		return
	}
	var req InferRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxInferBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", maxInferBody))
			return
		}
		writeError(w, http.StatusBadRequest, "malformed inference request: "+err.Error())
		return
	}
	sum, err := sumInputs(req.Inputs)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if math.IsInf(sum, 0) || math.IsNaN(sum) {
		// JSON has no number for it: say so rather than answer 200 empty.
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("the sum of the inputs is %v, which FP64 in JSON cannot carry", sum))
		return
	}
	writeJSON(w, http.StatusOK, InferResponse{
		ModelName: s.Name, ModelVersion: "1", ID: req.ID,
		Outputs: []Tensor{{Name: "sum", Shape: []int64{1}, Datatype: "FP64", Data: []float64{sum}}},
	})
}

// sumInputs checks the tensors as the protocol defines them and adds up
// their elements.
func sumInputs(inputs []Tensor) (float64, error) {
	if len(inputs) == 0 {
		return 0, errors.New("inputs: at least one tensor is required")
	}
	var sum float64
	for i, t := range inputs {
		if t.Name == "" {
			return 0, fmt.Errorf("inputs[%d].name: required", i)
		}
		if !numeric[t.Datatype] {
			return 0, fmt.Errorf("inputs[%d].datatype: %q is not a numeric datatype of the protocol", i, t.Datatype)
		}
		elems := int64(1)
		for j, d := range t.Shape {
			if d < 0 {
				return 0, fmt.Errorf("inputs[%d].shape[%d]: %d is negative", i, j, d)
			}
			elems *= d
			if elems > maxInferBody {
				return 0, fmt.Errorf("inputs[%d].shape: too many elements", i)
			}
		}
		if elems != int64(len(t.Data)) {
			return 0, fmt.Errorf("inputs[%d].data: %d elements, shape %v wants %d", i, len(t.Data), t.Shape, elems)
		}
		for _, v := range t.Data {
			sum += v
		}
	}
	return sum, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		code, body = http.StatusInternalServerError, []byte(`{"error":"the answer cannot be written as JSON"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// writeError answers as the protocol says: {"error": "<message>"}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
