package gateway

import (
	"fmt"
	"net/http"
	"net/netip"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/platform/keys"
)

// Defaults of an AIService that leaves a timeout out.
const (
	DefaultConnectTimeout = 2 * time.Second
	DefaultRequestTimeout = 30 * time.Second
)

// routeConfig is an AIService compiled for the gateway, with its API keys
// and ready endpoints. It is never changed once made: a change to any of
// them compiles a new one.
type routeConfig struct {
	namespace, name string
	// broken, when set, answers every request with 503: the AIService
	// could not be compiled (it failed validation the apiserver should have
	// done), and a gateway fails closed.
	broken string

	backendPath    string
	connectTimeout time.Duration
	timeout        time.Duration

	allowIPs, denyIPs []netip.Prefix

	apiKey bool
	// keys are the digests the controller published and their consumers;
	// the gateway never sees the keys themselves.
	keys *keys.Set
	// keysMissing, when set, is why no key can be checked (503).
	keysMissing                   string
	allowConsumers, denyConsumers map[string]bool

	methods         []string
	paths           []string
	maxBody         int64
	requiredHeaders []string

	killSwitch string // set: the kill switch is on, with this reason

	// service and consumer are the token buckets; nil: no limit.
	service, consumer *bucket
	// maxConcurrency bounds the requests in flight; 0: no bound.
	maxConcurrency int64
	breaker        *v1alpha1.CircuitBreaker

	endpoints []string
	// unavailable says why no endpoint is ready, from the AIService's
	// Ready condition.
	unavailable string
}

// compile makes the route of an AIService; pepper checks the API keys its
// status publishes, and endpoints are its ready "ip:port" addresses.
func compile(svc *v1alpha1.AIService, pepper []byte, endpoints []string) *routeConfig {
	s := &svc.Spec
	c := &routeConfig{
		namespace:      svc.Namespace,
		name:           svc.Name,
		backendPath:    s.Path,
		connectTimeout: millis(s.ConnectTimeoutMilliseconds, DefaultConnectTimeout),
		timeout:        DefaultRequestTimeout,
		endpoints:      endpoints,
		unavailable:    "no ready endpoint",
	}
	if c.backendPath == "" {
		c.backendPath = "/"
	}
	ready := meta.FindStatusCondition(svc.Status.Conditions, v1alpha1.ConditionReady)
	if ready != nil && ready.Status != metav1.ConditionTrue {
		c.unavailable = ready.Message
	}
	var err error
	if a := s.Access; a != nil {
		if c.allowIPs, err = prefixes(a.AllowCIDRs, "spec.access.allowCIDRs"); err == nil {
			c.denyIPs, err = prefixes(a.DenyCIDRs, "spec.access.denyCIDRs")
		}
		if err != nil {
			c.broken = err.Error()
		}
		c.allowConsumers, c.denyConsumers = set(a.AllowConsumers), set(a.DenyConsumers)
	}
	if a := s.Auth; a != nil && a.Method == v1alpha1.AuthAPIKey {
		c.apiKey = true
		published := svc.Status.APIKeys
		var err error
		if c.keys, err = keys.NewSet(pepper, published); err != nil {
			c.broken = err.Error()
		}
		switch {
		case a.SecretRef == nil:
			c.broken = "spec.auth.secretRef: required for method APIKey"
		case len(published) > 0:
		case ready != nil && ready.Reason == v1alpha1.ReasonSecretNotFound:
			c.keysMissing = fmt.Sprintf("the service's API keys (Secret %s of type %s) are missing", a.SecretRef.Name, v1alpha1.APIKeySecretType)
		case ready == nil || svc.Status.ObservedGeneration < svc.Generation:
			c.keysMissing = "the platform controller has not published the service's API keys yet"
		case ready.Status != metav1.ConditionTrue && ready.Reason != v1alpha1.ReasonSecretInvalid:
			// Not ready for another reason, checked before the keys.
			c.keysMissing = ready.Message
		}
	}
	if rc := s.Request; rc != nil {
		c.methods = slices.Clone(rc.Methods)
		c.paths = slices.Clone(rc.Paths)
		for i, p := range c.paths {
			if _, err := path.Match(p, ""); err != nil {
				c.broken = fmt.Sprintf("spec.request.paths[%d]: %q: %v", i, p, err)
			}
		}
		if rc.MaxBodyBytes != nil {
			c.maxBody = *rc.MaxBodyBytes
		}
		for _, h := range rc.RequiredHeaders {
			c.requiredHeaders = append(c.requiredHeaders, http.CanonicalHeaderKey(h))
		}
		c.timeout = millis(rc.TimeoutMilliseconds, DefaultRequestTimeout)
	}
	if ks := s.KillSwitch; ks != nil && ks.Enabled {
		c.killSwitch = ks.Reason
		if c.killSwitch == "" {
			c.killSwitch = "the service is switched off"
		}
	}
	if rl := s.RateLimit; rl != nil {
		c.service, c.consumer = newBucket(rl.QPS, rl.Burst), newBucket(rl.PerConsumerQPS, rl.PerConsumerBurst)
		if rl.MaxConcurrency != nil {
			c.maxConcurrency = int64(*rl.MaxConcurrency)
		}
	}
	if s.CircuitBreaker != nil {
		b := *s.CircuitBreaker
		c.breaker = &b
	}
	return c
}

func millis(ms int32, def time.Duration) time.Duration {
	if ms <= 0 {
		return def
	}
	return time.Duration(ms) * time.Millisecond
}

// prefixes parses CIDRs and addresses (a /32 or /128).
func prefixes(list []string, field string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %q is neither a CIDR nor an IP address", field, i, s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

func contains(list []netip.Prefix, a netip.Addr) bool {
	for _, p := range list {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func set(list []string) map[string]bool {
	if len(list) == 0 {
		return nil
	}
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}

// route is the gateway's state for one AIService: the current compiled
// configuration with the limiters and breaker made for it, and what must
// outlive a configuration (requests in flight, the round-robin position).
type route struct {
	state    atomic.Pointer[routeState]
	inflight atomic.Int64
	next     atomic.Uint64
	metrics  *routeMetrics
}

// release gives back the concurrency slot admit took.
func (rt *route) release() {
	rt.metrics.inflight.Set(float64(rt.inflight.Add(-1)))
}

// routeState is a configuration and the stateful controls made for it.
type routeState struct {
	cfg       *routeConfig
	limiter   *rate.Limiter // nil: no service QPS limit
	consumers *consumerLimiters
	breaker   *breaker
}

// update installs cfg, keeping the token buckets and the breaker whose
// settings did not change, so that an endpoint or key change neither
// refills a bucket nor closes an open breaker.
func (rt *route) update(cfg *routeConfig) {
	old := rt.state.Load()
	if old == nil {
		old = &routeState{cfg: &routeConfig{}}
	}
	st := &routeState{cfg: cfg}
	switch {
	case sameBucket(old.cfg.service, cfg.service):
		st.limiter = old.limiter
	case cfg.service != nil:
		st.limiter = rate.NewLimiter(cfg.service.qps, cfg.service.burst)
	}
	switch {
	case sameBucket(old.cfg.consumer, cfg.consumer):
		st.consumers = old.consumers
	case cfg.consumer != nil:
		st.consumers = &consumerLimiters{bucket: *cfg.consumer}
	}
	switch {
	case cfg.breaker == nil:
		rt.metrics.breakerState.Set(breakerClosed)
	case old.breaker != nil && equality.Semantic.DeepEqual(old.cfg.breaker, cfg.breaker):
		st.breaker = old.breaker
	default:
		st.breaker = newBreaker(cfg.breaker, rt.metrics.breakerState)
	}
	rt.state.Store(st)
}

// bucket is a token bucket's settings.
type bucket struct {
	qps   rate.Limit
	burst int
}

// newBucket is the bucket of qps and burst (default qps); nil without qps.
func newBucket(qps, burst *int32) *bucket {
	if qps == nil {
		return nil
	}
	b := &bucket{qps: rate.Limit(*qps), burst: int(*qps)}
	if burst != nil {
		b.burst = int(*burst)
	}
	return b
}

func sameBucket(a, b *bucket) bool { return a != nil && b != nil && *a == *b }

// consumerLimiters are the token buckets of a service's consumers, made
// as consumers first call. Consumers are the keys of the API-key Secret,
// so the map is bounded by it.
type consumerLimiters struct {
	bucket
	m sync.Map // consumer -> *rate.Limiter
}

func (c *consumerLimiters) get(consumer string) *rate.Limiter {
	if l, ok := c.m.Load(consumer); ok {
		return l.(*rate.Limiter)
	}
	l, _ := c.m.LoadOrStore(consumer, rate.NewLimiter(c.qps, c.burst))
	return l.(*rate.Limiter)
}
