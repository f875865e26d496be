package console

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/apis/platform/v1alpha1"
	aischedfake "github.com/aisched/aisched/pkg/generated/clientset/versioned/fake"
)

// testServer is a console whose clients are client-go fakes: the token
// "admin-token" is user admin and may do anything; any other token is
// refused by the "apiserver" (401); "nobody-token" is user nobody, whom
// every call but the review is forbidden.
type testServer struct {
	*Server
	kube    *kubefake.Clientset
	aisched *aischedfake.Clientset
}

func newTestServer(t *testing.T, objects ...runtime.Object) *testServer {
	t.Helper()
	s, err := New(Options{APIServer: &rest.Config{Host: "https://apiserver.invalid"}, GatewayURL: "http://gateway.invalid"})
	if err != nil {
		t.Fatal(err)
	}
	var kubeObjs, aiObjs []runtime.Object
	var topologies []*aischedv1alpha1.Topology
	for _, o := range objects {
		switch o := o.(type) {
		case *v1alpha1.AIService, *v1alpha1.Operator, *v1alpha1.OperatorInstance, *aischedv1alpha1.GPUInventory:
			aiObjs = append(aiObjs, o)
		case *aischedv1alpha1.Topology:
			// The fake's tracker would file it under the resource its kind
			// guesses (topologies); the client's create files it where the
			// client lists (aischedtopologies).
			topologies = append(topologies, o)
		default:
			kubeObjs = append(kubeObjs, o)
		}
	}
	ts := &testServer{Server: s, kube: kubefake.NewClientset(kubeObjs...), aisched: aischedfake.NewSimpleClientset(aiObjs...)}
	for _, topo := range topologies {
		if _, err := ts.aisched.AischedV1alpha1().AischedTopologies().Create(context.Background(), topo, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.newClients = func(token string) (*clients, error) {
		kube, ai := ts.kube, ts.aisched
		if token == "nobody-token" {
			// A user without rights: a fresh fake that refuses everything.
			k := kubefake.NewClientset()
			k.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetResource().Resource == "selfsubjectreviews" {
					return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: "nobody"}}}, nil
				}
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: a.GetResource().Resource}, "", nil)
			})
			a := aischedfake.NewSimpleClientset()
			a.PrependReactor("*", "*", func(act k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "platform.aisched.io", Resource: act.GetResource().Resource}, "", nil)
			})
			kube, ai = k, a
		}
		return &clients{kube: kube, aisched: ai}, nil
	}
	ts.kube.PrependReactor("create", "selfsubjectreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:masters"}}}}, nil
	})
	return ts
}

type testSession struct {
	cookie *http.Cookie
	csrf   string
}

func (ts *testServer) do(t *testing.T, method, path string, body any, sess *testSession, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req := httptest.NewRequest(method, path, r)
	if sess != nil {
		req.AddCookie(sess.cookie)
		if sess.csrf != "" {
			req.Header.Set(csrfHeader, sess.csrf)
		}
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	ts.ServeHTTP(w, req)
	return w
}

func (ts *testServer) signIn(t *testing.T, token string) *testSession {
	t.Helper()
	w := ts.do(t, "POST", "/api/login", map[string]string{"token": token}, nil, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("sign-in: %d %s", w.Code, w.Body)
	}
	var who whoamiResponse
	if err := json.Unmarshal(w.Body.Bytes(), &who); err != nil {
		t.Fatal(err)
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || strings.Contains(cookies[0].Value, token) {
		t.Fatalf("session cookie %+v: want one opaque HttpOnly SameSite=Strict cookie", cookies)
	}
	return &testSession{cookie: cookies[0], csrf: who.CSRF}
}

func TestSecurity(t *testing.T) {
	ts := newTestServer(t)
	w := ts.do(t, "GET", "/", nil, nil, nil)
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `<script src="app.js"`) {
		t.Errorf("index: %d", w.Code)
	}

	if w := ts.do(t, "GET", "/api/gpus", nil, nil, nil); w.Code != http.StatusUnauthorized {
		t.Errorf("without a session: %d, want 401", w.Code)
	}
	if w := ts.do(t, "POST", "/api/login", map[string]string{"token": strings.Repeat("x", maxTokenBytes+1)}, nil, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "token:") {
		t.Errorf("an oversized token: %d %s", w.Code, w.Body)
	}
	if w := ts.do(t, "POST", "/api/login", map[string]string{"token": "admin-token"}, nil, map[string]string{"Origin": "https://evil.example"}); w.Code != http.StatusForbidden {
		t.Errorf("cross-site sign-in: %d, want 403", w.Code)
	}

	sess := ts.signIn(t, "admin-token")
	if w := ts.do(t, "GET", "/api/whoami", nil, &testSession{cookie: sess.cookie}, nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"user":"admin"`) {
		t.Errorf("whoami: %d %s", w.Code, w.Body)
	}
	state := map[string]string{"state": "Offline"}
	if w := ts.do(t, "POST", "/api/instances/ml/sum/state", state, &testSession{cookie: sess.cookie}, nil); w.Code != http.StatusForbidden {
		t.Errorf("a change without the CSRF token: %d, want 403", w.Code)
	}
	if w := ts.do(t, "POST", "/api/instances/ml/sum/state", state, &testSession{cookie: sess.cookie, csrf: "wrong"}, nil); w.Code != http.StatusForbidden {
		t.Errorf("a change with a wrong CSRF token: %d, want 403", w.Code)
	}
	if w := ts.do(t, "POST", "/api/instances/ml/sum/state", state, sess, map[string]string{"Sec-Fetch-Site": "cross-site"}); w.Code != http.StatusForbidden {
		t.Errorf("a cross-site change: %d, want 403", w.Code)
	}
	// With the token the change reaches the "apiserver": NotFound there.
	if w := ts.do(t, "POST", "/api/instances/ml/sum/state", state, sess, nil); w.Code != http.StatusNotFound {
		t.Errorf("a change with the CSRF token: %d %s, want the apiserver's 404", w.Code, w.Body)
	}
	// Signed out, the cookie is worth nothing.
	if w := ts.do(t, "POST", "/api/logout", nil, sess, nil); w.Code != http.StatusNoContent {
		t.Errorf("sign-out: %d", w.Code)
	}
	if w := ts.do(t, "GET", "/api/whoami", nil, sess, nil); w.Code != http.StatusUnauthorized {
		t.Errorf("after sign-out: %d, want 401", w.Code)
	}
}

func TestAuthorizationHeader(t *testing.T) {
	ts := newTestServer(t)
	// Off by default: a request's own header is not an identity.
	if w := ts.do(t, "GET", "/api/whoami", nil, nil, map[string]string{"Authorization": "Bearer admin-token"}); w.Code != http.StatusUnauthorized {
		t.Errorf("Authorization header, not trusted: %d, want 401", w.Code)
	}
	ts.opts.TrustAuthorizationHeader = true
	w := ts.do(t, "GET", "/api/whoami", nil, nil, map[string]string{"Authorization": "Bearer admin-token"})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"user":"admin"`) {
		t.Errorf("Authorization header, trusted: %d %s", w.Code, w.Body)
	}
	// No cookie, so no CSRF token to ask for: the change reaches the apiserver.
	w = ts.do(t, "POST", "/api/instances/ml/sum/state", map[string]string{"state": "Offline"}, nil, map[string]string{"Authorization": "Bearer admin-token"})
	if w.Code != http.StatusNotFound {
		t.Errorf("a change with a trusted header: %d %s, want the apiserver's 404", w.Code, w.Body)
	}
}

func TestRefusalComesFromRBAC(t *testing.T) {
	ts := newTestServer(t)
	sess := ts.signIn(t, "nobody-token")
	for _, path := range []string{"/api/gpus", "/api/queue", "/api/platform/operators"} {
		w := ts.do(t, "GET", path, nil, sess, nil)
		var e apiError
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != http.StatusForbidden || e.Reason != string(metav1.StatusReasonForbidden) || !strings.Contains(e.Error, "forbidden") {
			t.Errorf("%s as nobody: %d %s, want the apiserver's 403", path, w.Code, w.Body)
		}
	}
}

func TestKeysAreWriteOnly(t *testing.T) {
	svc := &v1alpha1.AIService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "sum"},
		Spec:       v1alpha1.AIServiceSpec{Auth: &v1alpha1.Auth{Method: v1alpha1.AuthAPIKey, SecretRef: &v1alpha1.LocalRef{Name: "sum-keys"}}},
		Status:     v1alpha1.AIServiceStatus{APIKeys: []v1alpha1.APIKeyDigest{{Consumer: "alice", Digest: "d1g35t"}}},
	}
	old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "sum-keys"}, Type: v1alpha1.APIKeySecretType,
		Data: map[string][]byte{"old-user": []byte("old-key-0123456789")}}
	ts := newTestServer(t, svc, old)
	sess := ts.signIn(t, "admin-token")

	w := ts.do(t, "PUT", "/api/services/ml/sum/keys", map[string]any{"keys": map[string]string{"bad name": "short"}}, sess, nil)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `keys[\"bad name\"]: a consumer name`) || !strings.Contains(w.Body.String(), "key of 5 bytes") {
		t.Errorf("bad keys: %d %s, want both errors naming the key", w.Code, w.Body)
	}
	w = ts.do(t, "PUT", "/api/services/ml/sum/keys", map[string]any{"keys": map[string]string{"alice": "alice-key-0123456789"}}, sess, nil)
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), "alice-key") {
		t.Fatalf("writing keys: %d %s (the answer must not repeat a key)", w.Code, w.Body)
	}
	got, err := ts.kube.CoreV1().Secrets("ml").Get(t.Context(), "sum-keys", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Data) != 1 || string(got.Data["alice"]) != "alice-key-0123456789" {
		t.Errorf("Secret's keys %v: want exactly alice's, the old ones replaced", got.Data)
	}
	for _, a := range ts.kube.Actions()[:len(ts.kube.Actions())-1] {
		if a.GetResource().Resource == "secrets" && (a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch") {
			t.Errorf("the console read a Secret: %s", a.GetVerb())
		}
	}
	w = ts.do(t, "GET", "/api/platform/services", nil, sess, nil)
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), "d1g35t") || !strings.Contains(w.Body.String(), `"name":"sum"`) {
		t.Errorf("listed services: %d %s, want sum without its key digests", w.Code, w.Body)
	}
}

func TestPlatformInputs(t *testing.T) {
	ts := newTestServer(t)
	sess := ts.signIn(t, "admin-token")
	cases := []struct {
		method, path string
		body         any
		want         string
	}{
		{"POST", "/api/platform/widgets", map[string]any{}, "want operators, instances or services"},
		{"POST", "/api/platform/operators", map[string]any{"metadata": map[string]any{"name": "x"}}, "metadata.namespace: required"},
		{"POST", "/api/platform/operators", map[string]any{"metadata": map[string]any{"name": "x", "namespace": "ml"}, "spec": map[string]any{"colour": "red"}}, "colour"},
		{"PUT", "/api/platform/operators/ml/y", map[string]any{"metadata": map[string]any{"name": "x", "namespace": "ml"}}, "not the object of the path"},
		{"POST", "/api/instances/ml/sum/scale", map[string]any{"replicas": 10001}, "replicas: want 0 to 10000"},
		{"POST", "/api/instances/ml/sum/state", map[string]any{"state": "Sleeping"}, "want Online or Offline"},
		{"POST", "/api/services/ml/sum/try", map[string]any{"path": "/../../etc"}, "without '..'"},
		{"POST", "/api/services/ml/sum/try", map[string]any{"path": "/x", "method": "DELETE"}, "want GET or POST"},
		{"POST", "/api/simulations", map[string]any{"scenario": "x"}, "simulations are off"},
	}
	for _, c := range cases {
		w := ts.do(t, c.method, c.path, c.body, sess, nil)
		if w.Code < 400 || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s %s %v: %d %s, want an error with %q", c.method, c.path, c.body, w.Code, w.Body, c.want)
		}
	}
	// A body over the bound is refused before it is read whole.
	big := map[string]string{"path": "/" + strings.Repeat("a", maxBodyBytes)}
	if w := ts.do(t, "POST", "/api/services/ml/sum/try", big, sess, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "request body too large") {
		t.Errorf("an oversized body: %d %.200s", w.Code, w.Body)
	}
}
