package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Protocol is the application protocol of a service.
// +kubebuilder:validation:Enum=HTTP
type Protocol string

// ProtocolHTTP is HTTP/1.1 (and HTTP/2 between client and gateway).
const ProtocolHTTP Protocol = "HTTP"

// AuthMethod is how callers authenticate to a service.
// +kubebuilder:validation:Enum=None;APIKey
type AuthMethod string

const (
	// AuthNone lets every caller in (subject to the access lists).
	AuthNone AuthMethod = "None"
	// AuthAPIKey wants one of the keys of a Secret, as
	// "Authorization: Bearer <key>" or "X-API-Key: <key>".
	AuthAPIKey AuthMethod = "APIKey"
)

// BreakerStrategy is what opens a circuit breaker (Sentinel's strategies).
// +kubebuilder:validation:Enum=ErrorRatio;SlowCallRatio
type BreakerStrategy string

const (
	// ErrorRatio counts responses 5xx and failed connections.
	ErrorRatio BreakerStrategy = "ErrorRatio"
	// SlowCallRatio counts calls slower than slowCallMilliseconds.
	SlowCallRatio BreakerStrategy = "SlowCallRatio"
)

// AIService exposes an OperatorInstance: a NodePort Service, and a route
// /<namespace>/<name>/ on aisched's gateway that enforces the service's
// security controls in the order of the fields below.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=aisvc,categories=aisched
// +kubebuilder:printcolumn:name="Instance",type=string,JSONPath=`.spec.instanceRef.name`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="NodePort",type=integer,JSONPath=`.status.nodePort`
// +kubebuilder:printcolumn:name="Endpoints",type=integer,JSONPath=`.status.readyEndpoints`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AIService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AIServiceSpec `json:"spec"`
	// +optional
	Status AIServiceStatus `json:"status,omitempty"`
}

// AIServiceSpec is the service and its security controls.
// +kubebuilder:validation:XValidation:rule="!has(self.rateLimit) || !has(self.rateLimit.perConsumerQPS) || (has(self.auth) && self.auth.method == 'APIKey')",message="per-consumer limits count API keys: they need auth.method APIKey",fieldPath=".rateLimit.perConsumerQPS"
// +kubebuilder:validation:XValidation:rule="!has(self.access) || ((!has(self.access.allowConsumers) || size(self.access.allowConsumers) == 0) && (!has(self.access.denyConsumers) || size(self.access.denyConsumers) == 0)) || (has(self.auth) && self.auth.method == 'APIKey')",message="consumer lists name API keys: they need auth.method APIKey",fieldPath=".access"
type AIServiceSpec struct {
	// instanceRef is the OperatorInstance, in the service's namespace.
	InstanceRef LocalRef `json:"instanceRef"`
	// protocol is HTTP.
	// +kubebuilder:default=HTTP
	// +optional
	Protocol Protocol `json:"protocol,omitempty"`
	// port is the container port of the operator that serves, one of its ports.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// path is the API path on the pods that the gateway route maps to:
	// /<namespace>/<name>/x is proxied to <path>/x.
	// +kubebuilder:validation:Pattern=`^/[-a-zA-Z0-9._~/%]*$`
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:default=/
	// +optional
	Path string `json:"path,omitempty"`
	// description says what the service offers.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Description string `json:"description,omitempty"`
	// connectTimeoutMilliseconds bounds the gateway's connection to a pod.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600000
	// +kubebuilder:default=2000
	// +optional
	ConnectTimeoutMilliseconds int32 `json:"connectTimeoutMilliseconds,omitempty"`
	// access are the caller IP and consumer allow and deny lists.
	// +optional
	Access *AccessControl `json:"access,omitempty"`
	// auth is how callers authenticate.
	// +optional
	Auth *Auth `json:"auth,omitempty"`
	// request constrains what a request may be (request control).
	// +optional
	Request *RequestControl `json:"request,omitempty"`
	// killSwitch takes the service out of traffic without deleting it.
	// +optional
	KillSwitch *KillSwitch `json:"killSwitch,omitempty"`
	// rateLimit is the flow control, per service and per consumer.
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// circuitBreaker stops calling the pods while they fail or are slow.
	// +optional
	CircuitBreaker *CircuitBreaker `json:"circuitBreaker,omitempty"`
}

// AccessControl lists who may call. Deny wins over allow; an empty allow
// list allows everyone not denied.
type AccessControl struct {
	// allowCIDRs are the caller addresses allowed (e.g. 10.0.0.0/8, 192.0.2.7).
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) || isIP(self)",message="must be a CIDR (10.0.0.0/8) or an IP address"
	// +kubebuilder:validation:items:MaxLength=64
	// +optional
	AllowCIDRs []string `json:"allowCIDRs,omitempty"`
	// denyCIDRs are the caller addresses refused with 403.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) || isIP(self)",message="must be a CIDR (10.0.0.0/8) or an IP address"
	// +kubebuilder:validation:items:MaxLength=64
	// +optional
	DenyCIDRs []string `json:"denyCIDRs,omitempty"`
	// allowConsumers are the API key names (keys of the auth Secret) allowed.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	AllowConsumers []string `json:"allowConsumers,omitempty"`
	// denyConsumers are the API key names refused with 403.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	DenyConsumers []string `json:"denyConsumers,omitempty"`
}

// Auth is the authentication of callers.
// +kubebuilder:validation:XValidation:rule="self.method != 'APIKey' || has(self.secretRef)",message="method APIKey needs secretRef",fieldPath=".secretRef"
type Auth struct {
	// method is None or APIKey.
	// +kubebuilder:default=None
	// +optional
	Method AuthMethod `json:"method,omitempty"`
	// secretRef is a Secret of type platform.aisched.io/api-keys whose data
	// values are the valid keys; each data key names its consumer. Editing
	// the Secret rotates keys without restart.
	// +optional
	SecretRef *LocalRef `json:"secretRef,omitempty"`
}

// RequestControl constrains requests; a request that breaks a rule is
// refused before it reaches a pod.
type RequestControl struct {
	// methods allowed (405 otherwise); empty allows all.
	// +kubebuilder:validation:MaxItems=9
	// +kubebuilder:validation:items:Enum=GET;HEAD;POST;PUT;PATCH;DELETE;OPTIONS;CONNECT;TRACE
	// +optional
	Methods []string `json:"methods,omitempty"`
	// paths allowed after /<namespace>/<name>, as path.Match patterns
	// (/v2/models/*/infer); 404 otherwise. Empty allows all.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^/`
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	Paths []string `json:"paths,omitempty"`
	// maxBodyBytes bounds the request body (413 otherwise).
	// +kubebuilder:validation:Minimum=1
	// +optional
	// +kubebuilder:validation:Maximum=17179869184
	MaxBodyBytes *int64 `json:"maxBodyBytes,omitempty"`
	// requiredHeaders must be present (400 otherwise).
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^[-!#$%&'*+.^_|~0-9A-Za-z]+$`
	// +optional
	RequiredHeaders []string `json:"requiredHeaders,omitempty"`
	// timeoutMilliseconds bounds a request from the gateway's first byte to
	// the pod's last (504 otherwise).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600000
	// +kubebuilder:default=30000
	// +optional
	TimeoutMilliseconds int32 `json:"timeoutMilliseconds,omitempty"`
}

// KillSwitch refuses every request with 503 and the reason.
type KillSwitch struct {
	// enabled takes the service out of traffic.
	Enabled bool `json:"enabled"`
	// reason is told to callers.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Reason string `json:"reason,omitempty"`
}

// RateLimit is a token bucket (qps, burst) and a concurrency bound for the
// whole service, and optionally a token bucket per consumer. Over any span
// of t seconds at most burst + qps*t requests pass; the others get 429 with
// Retry-After.
// +kubebuilder:validation:XValidation:rule="!has(self.burst) || has(self.qps)",message="burst needs qps",fieldPath=".burst"
// +kubebuilder:validation:XValidation:rule="!has(self.perConsumerBurst) || has(self.perConsumerQPS)",message="perConsumerBurst needs perConsumerQPS",fieldPath=".perConsumerBurst"
type RateLimit struct {
	// qps is the sustained requests per second of the service.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	QPS *int32 `json:"qps,omitempty"`
	// burst is the bucket size; default qps.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	Burst *int32 `json:"burst,omitempty"`
	// maxConcurrency bounds the requests in flight.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	MaxConcurrency *int32 `json:"maxConcurrency,omitempty"`
	// perConsumerQPS is the sustained requests per second of each API key.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	PerConsumerQPS *int32 `json:"perConsumerQPS,omitempty"`
	// perConsumerBurst is each API key's bucket size; default perConsumerQPS.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	PerConsumerBurst *int32 `json:"perConsumerBurst,omitempty"`
}

// CircuitBreaker follows Sentinel's rule: over a rolling window of
// windowSeconds, once minRequests calls were made and thresholdPercent of
// them failed (or were slow), the breaker opens and the gateway answers 503
// at once; after openSeconds one probe goes through (half-open), and its
// success closes the breaker, its failure opens it again.
// +kubebuilder:validation:XValidation:rule="self.strategy != 'SlowCallRatio' || has(self.slowCallMilliseconds)",message="strategy SlowCallRatio needs slowCallMilliseconds",fieldPath=".slowCallMilliseconds"
type CircuitBreaker struct {
	// strategy is ErrorRatio or SlowCallRatio.
	Strategy BreakerStrategy `json:"strategy"`
	// thresholdPercent of failed (or slow) calls opens the breaker.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	ThresholdPercent int32 `json:"thresholdPercent"`
	// slowCallMilliseconds is the response time above which a call is slow.
	// +kubebuilder:validation:Minimum=1
	// +optional
	SlowCallMilliseconds *int32 `json:"slowCallMilliseconds,omitempty"`
	// minRequests is the least number of calls in the window before the breaker may open.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=5
	// +optional
	// +kubebuilder:validation:Maximum=1000000
	MinRequests int32 `json:"minRequests,omitempty"`
	// windowSeconds is the rolling window.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=10
	// +optional
	WindowSeconds int32 `json:"windowSeconds,omitempty"`
	// openSeconds is how long the breaker stays open before a probe.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=5
	// +optional
	OpenSeconds int32 `json:"openSeconds,omitempty"`
}

// AIServiceStatus says where and whether the service answers.
type AIServiceStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// url is the service's endpoint on the gateway.
	// +optional
	URL string `json:"url,omitempty"`
	// service is the name of the NodePort Service.
	// +optional
	Service string `json:"service,omitempty"`
	// nodePort is the Service's node port.
	// +optional
	NodePort int32 `json:"nodePort,omitempty"`
	// readyEndpoints is the number of ready pod endpoints.
	// +optional
	ReadyEndpoints int32 `json:"readyEndpoints"`
	// apiKeys are the service's API keys as the gateway checks them: each
	// consumer with the HMAC-SHA256 of its key under the platform's key
	// pepper, never the key. The controller publishes them from
	// spec.auth.secretRef, so the gateway reads no Secret of the services.
	// +listType=map
	// +listMapKey=consumer
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	APIKeys []APIKeyDigest `json:"apiKeys,omitempty"`
	// conditions: Ready, with the reason when not.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// APIKeyDigest is one consumer's API key as the gateway checks it.
type APIKeyDigest struct {
	// consumer is the data key of the API-key Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Consumer string `json:"consumer"`
	// digest is the base64 of HMAC-SHA256(pepper, key).
	// +kubebuilder:validation:MaxLength=64
	Digest string `json:"digest"`
}

// AIServiceList is a list of AIServices.
// +kubebuilder:object:root=true
type AIServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AIService `json:"items"`
}
