package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Reasons the gateway gives when it answers a request itself. They are the
// "reason" of the JSON body, the X-Aisched-Reason header and the reason
// label of aisched_gateway_rejections_total.
const (
	ReasonNoSuchService       = "NoSuchService"
	ReasonIPDenied            = "IPDenied"
	ReasonIPNotAllowed        = "IPNotAllowed"
	ReasonMissingAPIKey       = "MissingAPIKey"
	ReasonInvalidAPIKey       = "InvalidAPIKey"
	ReasonConsumerDenied      = "ConsumerDenied"
	ReasonMethodNotAllowed    = "MethodNotAllowed"
	ReasonPathNotAllowed      = "PathNotAllowed"
	ReasonBodyTooLarge        = "BodyTooLarge"
	ReasonBadRequestBody      = "BadRequestBody"
	ReasonMissingHeader       = "MissingHeader"
	ReasonKillSwitch          = "KillSwitch"
	ReasonRateLimited         = "RateLimited"
	ReasonConsumerRateLimited = "ConsumerRateLimited"
	ReasonTooManyConcurrent   = "TooManyConcurrent"
	ReasonCircuitOpen         = "CircuitOpen"
	ReasonUnavailable         = "Unavailable"
	ReasonUpstreamTimeout     = "UpstreamTimeout"
	ReasonUpstreamError       = "UpstreamError"
)

// rejection is the gateway's own answer to a request: a status, a reason
// and a message for the caller.
type rejection struct {
	code       int
	reason     string
	message    string
	retryAfter time.Duration // > 0: a Retry-After header, in whole seconds, at least 1
	header     http.Header   // extra headers (Allow, WWW-Authenticate)
}

func (r *rejection) Error() string { return r.reason + ": " + r.message }

func reject(code int, reason, message string) *rejection {
	return &rejection{code: code, reason: reason, message: message}
}

// write sends the rejection as JSON.
func (r *rejection) write(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	if r.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(r.retryAfter), 10))
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Aisched-Reason", r.reason)
	w.WriteHeader(r.code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // messages are read by people: keep < and >
	_ = enc.Encode(struct {
		Code    int    `json:"code"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}{r.code, r.reason, r.message})
}

// retryAfterSeconds rounds d up to whole seconds, at least 1: Retry-After
// has no fractions, and 0 would invite an immediate retry.
func retryAfterSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
