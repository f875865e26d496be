package v1alpha1

// State says whether an Operator or an OperatorInstance serves.
// +kubebuilder:validation:Enum=Online;Offline
type State string

const (
	// Online objects run and serve.
	Online State = "Online"
	// Offline objects are kept but run no pods: their GPUs are free.
	Offline State = "Offline"
)

// Labels the platform puts on the objects it makes.
const (
	// InstanceLabel is on the Deployment and pods of an OperatorInstance
	// (its name); an AIService's Service selects the pods by it.
	InstanceLabel = "platform.aisched.io/instance"
	// OperatorLabel is on the Deployment and pods of an OperatorInstance:
	// the Operator they run.
	OperatorLabel = "platform.aisched.io/operator"
	// ServiceLabel is on the Service of an AIService (its name). The
	// EndpointSlice controller copies a Service's labels to its slices, so
	// the gateway watches only the slices that carry it.
	ServiceLabel = "platform.aisched.io/service"
)

// APIKeySecretType is the type of the Secrets that hold an AIService's API
// keys: each data key names a consumer, its value is that consumer's key.
// The controller reads only Secrets of this type, and publishes their
// digests in the AIService's status.apiKeys; the gateway reads no Secret
// of the services.
//
//	kubectl create secret generic demo-keys --type=platform.aisched.io/api-keys --from-literal=alice=KEY
const APIKeySecretType = "platform.aisched.io/api-keys"

// MaxAPIKeys bounds the keys of one AIService.
const MaxAPIKeys = 1000

// Condition types and reasons shared by the platform's objects.
const (
	// ConditionReady is True when the object serves: an Operator that
	// instances may use, an instance with all its replicas ready, a service
	// with ready endpoints behind the gateway.
	ConditionReady = "Ready"

	ReasonOnline           = "Online"
	ReasonOffline          = "Offline"
	ReasonReady            = "Ready"
	ReasonOperatorNotFound = "OperatorNotFound"
	ReasonOperatorOffline  = "OperatorOffline"
	ReasonDeploymentFailed = "DeploymentFailed"
	ReasonReplicasNotReady = "ReplicasNotReady"
	ReasonUnschedulable    = "Unschedulable"
	ReasonInstanceNotFound = "InstanceNotFound"
	ReasonInstanceOffline  = "InstanceOffline"
	ReasonPortNotFound     = "PortNotFound"
	ReasonSecretNotFound   = "SecretNotFound"
	ReasonSecretInvalid    = "SecretInvalid"
	ReasonNoReadyEndpoints = "NoReadyEndpoints"
	ReasonKillSwitch       = "KillSwitch"
	ReasonServiceFailed    = "ServiceFailed"
)
