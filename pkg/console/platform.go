package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
)

// Bounds of the platform's inputs.
const (
	maxReplicas = 10000
	// maxKeys bounds the API keys of one service written at once.
	maxKeys = 100
	// minKeyBytes and maxKeyBytes bound an API key.
	minKeyBytes, maxKeyBytes = 16, 256
	// tryTimeout bounds a test request through the gateway.
	tryTimeout = 30 * time.Second
	// maxAnswerBytes bounds the answer of a test request shown.
	maxAnswerBytes = 64 << 10
)

// consumerName is what a Secret's data key may be.
var consumerName = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,253}$`)

// platformKinds are the kinds the platform page lists and edits, by the
// name in the API's path.
var platformKinds = map[string]bool{"operators": true, "instances": true, "services": true}

func (s *Server) listPlatform(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	kind, ns := r.PathValue("kind"), r.URL.Query().Get("namespace")
	p := c.aisched.PlatformV1alpha1()
	var (
		list any
		err  error
	)
	switch kind {
	case "operators":
		list, err = p.Operators(ns).List(r.Context(), metav1.ListOptions{})
	case "instances":
		list, err = p.OperatorInstances(ns).List(r.Context(), metav1.ListOptions{})
	case "services":
		var l *v1alpha1.AIServiceList
		if l, err = p.AIServices(ns).List(r.Context(), metav1.ListOptions{}); err == nil {
			for i := range l.Items {
				// Digests of API keys are of no use to a person; keys are
				// write-only.
				l.Items[i].Status.APIKeys = nil
			}
		}
		list = l
	default:
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("kind %q: want operators, instances or services", kind)})
		return
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) createPlatform(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	s.writePlatform(w, r, c, false)
}

func (s *Server) updatePlatform(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	s.writePlatform(w, r, c, true)
}

// writePlatform creates or updates the object in the body; the apiserver
// validates it (schema and CEL) and its errors name the field.
func (s *Server) writePlatform(w http.ResponseWriter, r *http.Request, c *clients, update bool) {
	kind := r.PathValue("kind")
	if !platformKinds[kind] {
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("kind %q: want operators, instances or services", kind)})
		return
	}
	ctx, p := r.Context(), c.aisched.PlatformV1alpha1()
	var (
		out any
		err error
	)
	switch kind {
	case "operators":
		var obj v1alpha1.Operator
		if err = s.readObject(r, &obj.ObjectMeta, &obj, update); err == nil {
			out, err = write(ctx, p.Operators(obj.Namespace), &obj, update)
		}
	case "instances":
		var obj v1alpha1.OperatorInstance
		if err = s.readObject(r, &obj.ObjectMeta, &obj, update); err == nil {
			out, err = write(ctx, p.OperatorInstances(obj.Namespace), &obj, update)
		}
	case "services":
		var obj v1alpha1.AIService
		if err = s.readObject(r, &obj.ObjectMeta, &obj, update); err == nil {
			obj.Status = v1alpha1.AIServiceStatus{}
			out, err = write(ctx, p.AIServices(obj.Namespace), &obj, update)
		}
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	code := http.StatusCreated
	if update {
		code = http.StatusOK
	}
	writeJSON(w, code, out)
}

// writer is a typed client of one platform kind.
type writer[T any] interface {
	Create(ctx context.Context, obj *T, opts metav1.CreateOptions) (*T, error)
	Update(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error)
}

// write creates obj, or updates it.
func write[T any](ctx context.Context, w writer[T], obj *T, update bool) (*T, error) {
	if update {
		return w.Update(ctx, obj, metav1.UpdateOptions{})
	}
	return w.Create(ctx, obj, metav1.CreateOptions{})
}

// readObject decodes the body into obj and checks its name and namespace
// against the path of an update.
func (s *Server) readObject(r *http.Request, meta *metav1.ObjectMeta, obj any, update bool) error {
	if err := readJSON(r, obj); err != nil {
		return err
	}
	if meta.Namespace == "" {
		return errors.New("metadata.namespace: required")
	}
	if update && (meta.Namespace != r.PathValue("namespace") || meta.Name != r.PathValue("name")) {
		return fmt.Errorf("metadata: %s/%s is not the object of the path, %s/%s", meta.Namespace, meta.Name, r.PathValue("namespace"), r.PathValue("name"))
	}
	return nil
}

func (s *Server) deletePlatform(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	ctx, p := r.Context(), c.aisched.PlatformV1alpha1()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	var err error
	switch r.PathValue("kind") {
	case "operators":
		err = p.Operators(ns).Delete(ctx, name, metav1.DeleteOptions{})
	case "instances":
		err = p.OperatorInstances(ns).Delete(ctx, name, metav1.DeleteOptions{})
	case "services":
		err = p.AIServices(ns).Delete(ctx, name, metav1.DeleteOptions{})
	default:
		writeJSON(w, http.StatusNotFound, apiError{Error: "kind: want operators, instances or services"})
		return
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type stateRequest struct {
	State v1alpha1.State `json:"state"`
}

// setInstanceState brings an instance online or offline.
func (s *Server) setInstanceState(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	var req stateRequest
	if !decode(w, r, &req) {
		return
	}
	if req.State != v1alpha1.Online && req.State != v1alpha1.Offline {
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("state %q: want Online or Offline", req.State)})
		return
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"state": req.State}})
	out, err := c.aisched.PlatformV1alpha1().OperatorInstances(r.PathValue("namespace")).Patch(r.Context(), r.PathValue("name"), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

type scaleRequest struct {
	Replicas *int32 `json:"replicas"`
}

// scaleInstance sets an instance's replicas through its scale subresource,
// as kubectl scale and autoscalers do.
func (s *Server) scaleInstance(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	var req scaleRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Replicas == nil || *req.Replicas < 0 || *req.Replicas > maxReplicas {
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("replicas: want 0 to %d", maxReplicas)})
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: autoscalingv1.ScaleSpec{Replicas: *req.Replicas}}
	out, err := c.aisched.PlatformV1alpha1().OperatorInstances(ns).UpdateScale(r.Context(), name, scale, metav1.UpdateOptions{})
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

type keysRequest struct {
	// Keys maps each consumer to its key; they replace the Secret's keys.
	Keys map[string]string `json:"keys"`
}

type keysResponse struct {
	Secret    string   `json:"secret"`
	Consumers []string `json:"consumers"`
}

// writeKeys writes the API keys of a service into the Secret its
// spec.auth.secretRef names, replacing the keys there. It never reads the
// Secret: keys are write-only in the console.
func (s *Server) writeKeys(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	var req keysRequest
	if !decode(w, r, &req) {
		return
	}
	if err := checkKeys(req.Keys); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return
	}
	ctx, ns := r.Context(), r.PathValue("namespace")
	svc, err := c.aisched.PlatformV1alpha1().AIServices(ns).Get(ctx, r.PathValue("name"), metav1.GetOptions{})
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	if svc.Spec.Auth == nil || svc.Spec.Auth.Method != v1alpha1.AuthAPIKey || svc.Spec.Auth.SecretRef == nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "spec.auth: the service takes no API keys (method APIKey and secretRef.name set it)"})
		return
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc.Spec.Auth.SecretRef.Name},
		Type:       v1alpha1.APIKeySecretType,
		StringData: req.Keys,
	}
	consumers := make([]string, 0, len(req.Keys))
	for k := range req.Keys {
		consumers = append(consumers, k)
	}
	// Create the Secret, or replace its keys with a JSON patch: either
	// way the Secret's keys become exactly these, and nothing is read.
	_, err = c.kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		data := map[string][]byte{}
		for k, v := range req.Keys {
			data[k] = []byte(v)
		}
		patch, _ := json.Marshal([]map[string]any{{"op": "add", "path": "/data", "value": data}})
		_, err = c.kube.CoreV1().Secrets(ns).Patch(ctx, secret.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	writeJSON(w, http.StatusOK, keysResponse{Secret: secret.Name, Consumers: sortedStrings(consumers)})
}

func checkKeys(keys map[string]string) error {
	if len(keys) == 0 || len(keys) > maxKeys {
		return fmt.Errorf("keys: %d given, want 1 to %d", len(keys), maxKeys)
	}
	var errs []error
	for consumer, key := range keys {
		if !consumerName.MatchString(consumer) {
			errs = append(errs, fmt.Errorf("keys[%.64q]: a consumer name has letters, digits, '-', '_' and '.', at most 253", consumer))
		}
		if len(key) < minKeyBytes || len(key) > maxKeyBytes {
			errs = append(errs, fmt.Errorf("keys[%.64q]: key of %d bytes, want %d to %d", consumer, len(key), minKeyBytes, maxKeyBytes))
		}
	}
	return errors.Join(errs...)
}

type tryRequest struct {
	// Path is below the service's route, e.g. /v2/models/sum/infer.
	Path   string `json:"path"`
	Method string `json:"method"`
	Body   string `json:"body,omitempty"`
	// APIKey is sent as "Authorization: Bearer"; never kept.
	APIKey string `json:"apiKey,omitempty"`
}

type tryResponse struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"contentType,omitempty"`
	Body        string `json:"body"`
	Truncated   bool   `json:"truncated,omitempty"`
	Millis      int64  `json:"millis"`
}

// tryService sends a test request to a service through the gateway, once
// the user may read the service.
func (s *Server) tryService(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	if s.gateway == nil {
		writeJSON(w, http.StatusNotFound, apiError{Error: "test requests are off: the console was started without --gateway-url"})
		return
	}
	var req tryRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	switch {
	case req.Method != http.MethodGet && req.Method != http.MethodPost:
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("method %.16q: want GET or POST", req.Method)})
		return
	case !strings.HasPrefix(req.Path, "/") || strings.Contains(req.Path, ".."):
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("path %.64q: want an absolute path without '..'", req.Path)})
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if _, err := c.aisched.PlatformV1alpha1().AIServices(ns).Get(r.Context(), name, metav1.GetOptions{}); err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	target := s.gateway.JoinPath(ns, name).String() + req.Path
	ctx, cancel := context.WithTimeout(r.Context(), tryTimeout)
	defer cancel()
	out, err := send(ctx, req, target)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, apiError{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func send(ctx context.Context, req tryRequest, target string) (tryResponse, error) {
	var body io.Reader
	if req.Body != "" {
		body = bytes.NewBufferString(req.Body)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.Method, target, body)
	if err != nil {
		return tryResponse{}, fmt.Errorf("path: %w", err)
	}
	if req.Body != "" {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if req.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+req.APIKey)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return tryResponse{}, fmt.Errorf("the gateway: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil && !errors.Is(err, io.EOF) {
		return tryResponse{}, fmt.Errorf("reading the answer: %w", err)
	}
	out := tryResponse{URL: target, Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Millis: time.Since(start).Milliseconds()}
	if len(b) > maxAnswerBytes {
		b, out.Truncated = b[:maxAnswerBytes], true
	}
	out.Body = string(b)
	return out, nil
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}
