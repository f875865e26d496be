package gateway

import (
	"fmt"
	"net/http"
	"net/netip"
	"path"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// clientIP is the caller: the peer, or behind trusted proxies the
// right-most X-Forwarded-For address that is not one of them. chain is the
// part of X-Forwarded-For that is believed, from the caller on: what the
// caller wrote itself, left of it, is not passed on to the pod. Zones
// (fe80::1%eth0) are dropped: netip.Prefix.Contains never matches an
// address with one, and the lists would not apply.
func (g *Gateway) clientIP(r *http.Request) (client netip.Addr, chain []string) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, nil
	}
	peer := ap.Addr().Unmap().WithZone("")
	if !contains(g.opts.TrustedProxies, peer) {
		return peer, nil
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := range hops {
		hops[i] = strings.TrimSpace(hops[i])
	}
	client = peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			// A malformed hop ends what can be believed.
			return client, hops[i+1:]
		}
		client = a.Unmap().WithZone("")
		if !contains(g.opts.TrustedProxies, client) {
			return client, hops[i:]
		}
	}
	return client, hops
}

// authenticate checks the API key and the consumer lists; it returns the
// consumer, "" for a service without keys.
func authenticate(r *http.Request, cfg *routeConfig) (string, *rejection) {
	if !cfg.apiKey {
		return "", nil
	}
	if cfg.keysMissing != "" {
		return "", reject(http.StatusServiceUnavailable, ReasonUnavailable, cfg.keysMissing)
	}
	key := ""
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		key = strings.TrimSpace(token)
	}
	if key == "" {
		key = strings.TrimSpace(r.Header.Get("X-API-Key"))
	}
	if key == "" {
		rej := reject(http.StatusUnauthorized, ReasonMissingAPIKey, "an API key is required: Authorization: Bearer <key>, or X-API-Key: <key>")
		rej.header = http.Header{"Www-Authenticate": {`Bearer realm="aisched"`}}
		return "", rej
	}
	consumer, ok := cfg.keys.Consumer(key)
	if !ok {
		rej := reject(http.StatusUnauthorized, ReasonInvalidAPIKey, "the API key is not valid for this service")
		rej.header = http.Header{"Www-Authenticate": {`Bearer realm="aisched", error="invalid_token"`}}
		return "", rej
	}
	if cfg.denyConsumers[consumer] {
		return "", reject(http.StatusForbidden, ReasonConsumerDenied, fmt.Sprintf("consumer %q is on the service's deny list", consumer))
	}
	if cfg.allowConsumers != nil && !cfg.allowConsumers[consumer] {
		return "", reject(http.StatusForbidden, ReasonConsumerDenied, fmt.Sprintf("consumer %q is not on the service's allow list", consumer))
	}
	return consumer, nil
}

// checkRequest applies the request control.
func checkRequest(r *http.Request, cfg *routeConfig, rest string) *rejection {
	if len(cfg.methods) > 0 && !containsString(cfg.methods, r.Method) {
		rej := reject(http.StatusMethodNotAllowed, ReasonMethodNotAllowed, fmt.Sprintf("method %s is not allowed; allowed: %s", r.Method, strings.Join(cfg.methods, ", ")))
		rej.header = http.Header{"Allow": {strings.Join(cfg.methods, ", ")}}
		return rej
	}
	if len(cfg.paths) > 0 && !matchAny(cfg.paths, rest) {
		return reject(http.StatusNotFound, ReasonPathNotAllowed, fmt.Sprintf("path %s is not among the service's paths", rest))
	}
	if cfg.maxBody > 0 && r.ContentLength > cfg.maxBody {
		return reject(http.StatusRequestEntityTooLarge, ReasonBodyTooLarge, fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, cfg.maxBody))
	}
	for _, h := range cfg.requiredHeaders {
		if r.Header.Get(h) == "" {
			return reject(http.StatusBadRequest, ReasonMissingHeader, fmt.Sprintf("header %s is required", h))
		}
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func matchAny(patterns []string, p string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
	}
	return false
}

// admit takes a token from the consumer's and the service's buckets and a
// slot of the concurrency bound, all or none; slot says a slot was taken,
// which route.release gives back.
func admit(st *routeState, rt *route, consumer string, now time.Time) (slot bool, rej *rejection) {
	cfg := st.cfg
	var taken [2]*rate.Reservation
	undo := func() {
		for _, r := range taken {
			if r != nil {
				r.CancelAt(now)
			}
		}
	}
	if st.consumers != nil && consumer != "" {
		res := st.consumers.get(consumer).ReserveN(now, 1)
		if d := res.DelayFrom(now); !res.OK() || d > 0 {
			res.CancelAt(now)
			rej := reject(http.StatusTooManyRequests, ReasonConsumerRateLimited, fmt.Sprintf("consumer %q is over its limit of %v requests per second", consumer, cfg.consumer.qps))
			rej.retryAfter = d
			return false, rej
		}
		taken[0] = res
	}
	if st.limiter != nil {
		res := st.limiter.ReserveN(now, 1)
		if d := res.DelayFrom(now); !res.OK() || d > 0 {
			res.CancelAt(now)
			undo()
			rej := reject(http.StatusTooManyRequests, ReasonRateLimited, fmt.Sprintf("the service is over its limit of %v requests per second", cfg.service.qps))
			rej.retryAfter = d
			return false, rej
		}
		taken[1] = res
	}
	limit := cfg.maxConcurrency
	if limit <= 0 {
		return false, nil
	}
	if rt.inflight.Add(1) > limit {
		rt.inflight.Add(-1)
		undo()
		rej := reject(http.StatusTooManyRequests, ReasonTooManyConcurrent, fmt.Sprintf("the service has its maximum of %d requests in progress", limit))
		rej.retryAfter = time.Second
		return false, rej
	}
	rt.metrics.inflight.Set(float64(rt.inflight.Load()))
	return true, nil
}
