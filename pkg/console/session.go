package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// cookieName is the session cookie; its value is an opaque random ID.
	cookieName = "aisched_console"
	// csrfHeader carries the session's CSRF token on every change.
	csrfHeader = "X-CSRF-Token"
	// maxSessions bounds the sessions kept; the oldest go first.
	maxSessions = 10000
	// maxTokenBytes bounds a token given at sign-in (an OIDC ID token with
	// many groups is a few KiB).
	maxTokenBytes = 16 << 10
)

// identity is who a request acts as.
type identity struct {
	// token is the bearer token every call to the apiserver carries.
	token string
	// user and groups are what the apiserver said of the token at sign-in.
	user   string
	groups []string
	// csrf is the session's CSRF token; empty for a request that brought
	// its own Authorization header.
	csrf string
}

type session struct {
	identity
	expires time.Time
}

// sessions are the signed-in users, in memory: a restarted console asks
// everyone to sign in again.
type sessions struct {
	ttl   time.Duration
	limit int
	// signIns bounds the rate of sign-in attempts, each a call to the
	// apiserver with a token to check.
	signIns *rate.Limiter

	mu   sync.Mutex
	byID map[string]*session
}

func newSessions(ttl time.Duration, limit int) *sessions {
	return &sessions{ttl: ttl, limit: limit, signIns: rate.NewLimiter(10, 20), byID: map[string]*session{}}
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// add keeps id for a new session, dropping expired ones, and the one
// closest to expiry when the table is full.
func (s *sessions) add(id identity, now time.Time) string {
	key := randomID()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= s.limit {
		var oldest string
		for k, v := range s.byID {
			if now.After(v.expires) {
				delete(s.byID, k)
				continue
			}
			if oldest == "" || v.expires.Before(s.byID[oldest].expires) {
				oldest = k
			}
		}
		if len(s.byID) >= s.limit {
			delete(s.byID, oldest)
		}
	}
	s.byID[key] = &session{identity: id, expires: now.Add(s.ttl)}
	return key
}

func (s *sessions) get(key string, now time.Time) (identity, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[key]
	if !ok {
		return identity{}, false
	}
	if now.After(v.expires) {
		delete(s.byID, key)
		return identity{}, false
	}
	return v.identity, true
}

func (s *sessions) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, key)
}

type loginRequest struct {
	Token string `json:"token"`
}

type whoamiResponse struct {
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
	// CSRF is the token the pages send in X-CSRF-Token with each change.
	CSRF string `json:"csrf,omitempty"`
	// Simulations and TestRequests say which optional parts are on.
	Simulations  bool `json:"simulations"`
	TestRequests bool `json:"testRequests"`
}

// login checks a bearer token with the apiserver (SelfSubjectReview) and
// opens a session for it.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeJSON(w, http.StatusForbidden, apiError{Error: "cross-site sign-in refused"})
		return
	}
	if !s.sessions.signIns.Allow() {
		writeJSON(w, http.StatusTooManyRequests, apiError{Error: "too many sign-in attempts; try again in a second"})
		return
	}
	var req loginRequest
	if !decode(w, r, &req) {
		return
	}
	req.Token = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(req.Token), "Bearer "))
	switch {
	case req.Token == "":
		writeJSON(w, http.StatusBadRequest, apiError{Error: "token: empty; paste a bearer token the apiserver accepts (kubectl create token, or your OIDC ID token)"})
		return
	case len(req.Token) > maxTokenBytes:
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("token: %d bytes, at most %d", len(req.Token), maxTokenBytes)})
		return
	}
	id, err := s.review(r, req.Token)
	if err != nil {
		writeError(w, http.StatusUnauthorized, err)
		return
	}
	id.csrf = randomID()
	key := s.sessions.add(id, time.Now())
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: key, Path: "/", HttpOnly: true, Secure: s.opts.SecureCookies,
		SameSite: http.SameSiteStrictMode, MaxAge: int(s.opts.SessionTTL / time.Second),
	})
	writeJSON(w, http.StatusOK, s.whoamiOf(id))
}

// review asks the apiserver who token is.
func (s *Server) review(r *http.Request, token string) (identity, error) {
	c, err := s.newClients(token)
	if err != nil {
		return identity{}, err
	}
	rev, err := c.kube.AuthenticationV1().SelfSubjectReviews().Create(r.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsUnauthorized(err) {
			return identity{}, errors.New("the apiserver does not accept this token")
		}
		return identity{}, fmt.Errorf("checking the token with the apiserver: %w", err)
	}
	u := rev.Status.UserInfo
	return identity{token: token, user: u.Username, groups: u.Groups}, nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		if id, ok := s.sessions.get(ck.Value, time.Now()); ok {
			if !validCSRF(r, id.csrf) {
				writeJSON(w, http.StatusForbidden, apiError{Error: "missing or wrong " + csrfHeader})
				return
			}
		}
		s.sessions.remove(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, Secure: s.opts.SecureCookies, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) whoamiOf(id identity) whoamiResponse {
	return whoamiResponse{User: id.user, Groups: id.groups, CSRF: id.csrf, Simulations: s.opts.Simulations != nil, TestRequests: s.gateway != nil}
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request, _ *clients, id identity) {
	if id.user == "" {
		// A request with its own Authorization header: ask who it is.
		reviewed, err := s.review(r, id.token)
		if err != nil {
			writeError(w, http.StatusUnauthorized, err)
			return
		}
		id.user, id.groups = reviewed.user, reviewed.groups
	}
	writeJSON(w, http.StatusOK, s.whoamiOf(id))
}

// userHandler is an API handler that acts as the request's user.
type userHandler func(w http.ResponseWriter, r *http.Request, c *clients, id identity)

// user resolves the request's identity (the session, or its own bearer
// token where trusted), checks the CSRF token of changes, and calls h with
// clients that act as the user.
func (s *Server) user(h userHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var (
			id identity
			ok bool
		)
		if auth := r.Header.Get("Authorization"); s.opts.TrustAuthorizationHeader && strings.HasPrefix(auth, "Bearer ") {
			id, ok = identity{token: strings.TrimPrefix(auth, "Bearer ")}, true
		} else if ck, err := r.Cookie(cookieName); err == nil {
			id, ok = s.sessions.get(ck.Value, time.Now())
			if ok && r.Method != http.MethodGet && r.Method != http.MethodHead && (!validCSRF(r, id.csrf) || !sameOrigin(r)) {
				writeJSON(w, http.StatusForbidden, apiError{Error: "missing or wrong " + csrfHeader + ", or a cross-site request"})
				return
			}
		}
		if !ok {
			writeJSON(w, http.StatusUnauthorized, apiError{Error: "not signed in"})
			return
		}
		c, err := s.newClients(id.token)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		h(w, r, c, id)
	})
}

func validCSRF(r *http.Request, want string) bool {
	got := r.Header.Get(csrfHeader)
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// sameOrigin refuses requests a browser marks as coming from another site:
// Sec-Fetch-Site, else an Origin whose host is not the request's.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}
