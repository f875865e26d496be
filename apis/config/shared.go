package config

import (
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/util/yamlfile"
)

// The group version and kind of a SharedConfiguration file.
const (
	SharedAPIVersion = "config.aisched.io/v1alpha1"
	SharedKind       = "SharedConfiguration"
	// DeprecatedSharedKind is SharedKind's old name, still read with a
	// warning: files and Helm values written before the rename keep
	// working.
	DeprecatedSharedKind = "SchedulerServices"

	// DefaultDRADriver is gpus.draDriver's default: NVIDIA's DRA driver.
	DefaultDRADriver = "gpu.nvidia.com"
)

// SharedConfiguration configures the state that aisched's plugins share
// across every profile of one scheduler: the GPU view (which card each
// pod holds), and the job queue. That state is built once, from this
// configuration, before the profiles; no plugin argument can change it,
// so two profiles cannot disagree about it. `aisched scheduler` reads it
// from --shared-config (defaults when absent).
type SharedConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// gpus configures the GPU view.
	GPUs GPUViewConfig `json:"gpus,omitempty"`
	// jobQueue configures the job queue.
	JobQueue JobQueueConfig `json:"jobQueue,omitempty"`
}

// GPUViewConfig configures the scheduler's one GPU view.
type GPUViewConfig struct {
	// useFeatureDiscoveryLabels lets nodes without a GPUInventory be read
	// from NVIDIA GPU Feature Discovery labels; default true.
	UseFeatureDiscoveryLabels *bool `json:"useFeatureDiscoveryLabels,omitempty"`
	// draDriver is the DRA driver whose devices are GPUs: the GPU view
	// counts the devices of its ResourceSlices as cards and its allocated
	// ResourceClaims as holdings, and the GPUClaims plugin chooses its
	// devices (docs/dra.md). Default gpu.nvidia.com (NVIDIA's).
	DRADriver string `json:"draDriver,omitempty"`
}

// JobQueueConfig configures the job queue.
type JobQueueConfig struct {
	// backoffSeconds is how long the job queue holds a group back after a
	// failed attempt (a member found no node, or Permit timed out); it
	// doubles with each failure in a row up to maxBackoffSeconds. Default
	// 2, 1 to 3600.
	BackoffSeconds *int64 `json:"backoffSeconds,omitempty"`
	// maxBackoffSeconds caps the backoff; default 60, backoffSeconds to
	// 3600.
	MaxBackoffSeconds *int64 `json:"maxBackoffSeconds,omitempty"`
	// backfill lets the job queue admit groups behind a waiting group
	// where they cannot delay it; false makes them wait behind it.
	// Default true.
	Backfill *bool `json:"backfill,omitempty"`
	// partialGroupSeconds is how long a group may hold some but fewer
	// than min-available members bound while the job queue cannot admit
	// the rest (after a scheduler restart, say, when the capacity for them
	// was taken meanwhile): then the queue deletes the bound members, with
	// the reason on them, so that their cards are free and the group
	// starts over as a whole (their controllers make them again).
	// Default 300, 10 to 86400.
	PartialGroupSeconds *int64 `json:"partialGroupSeconds,omitempty"`
}

// DefaultShared returns the defaulted shared configuration.
func DefaultShared() *SharedConfiguration {
	s := &SharedConfiguration{}
	s.Default()
	return s
}

// Default fills the fields the configuration left empty.
func (s *SharedConfiguration) Default() {
	s.APIVersion, s.Kind = SharedAPIVersion, SharedKind
	if s.GPUs.UseFeatureDiscoveryLabels == nil {
		s.GPUs.UseFeatureDiscoveryLabels = ptr.To(true)
	}
	if s.GPUs.DRADriver == "" {
		s.GPUs.DRADriver = DefaultDRADriver
	}
	q := &s.JobQueue
	if q.BackoffSeconds == nil {
		q.BackoffSeconds = ptr.To[int64](2)
	}
	if q.MaxBackoffSeconds == nil {
		q.MaxBackoffSeconds = ptr.To[int64](60)
	}
	if q.Backfill == nil {
		q.Backfill = ptr.To(true)
	}
	if q.PartialGroupSeconds == nil {
		q.PartialGroupSeconds = ptr.To[int64](300)
	}
}

// Validate checks the defaulted configuration; every error names its field.
func (s *SharedConfiguration) Validate() field.ErrorList {
	var errs field.ErrorList
	if s.APIVersion != SharedAPIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), s.APIVersion, []string{SharedAPIVersion}))
	}
	if s.Kind != SharedKind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), s.Kind, []string{SharedKind}))
	}
	if msgs := validation.IsDNS1123Subdomain(s.GPUs.DRADriver); len(msgs) > 0 || len(s.GPUs.DRADriver) > 63 {
		errs = append(errs, field.Invalid(field.NewPath("gpus", "draDriver"), s.GPUs.DRADriver, "must be a DNS subdomain of at most 63 characters, a DRA driver's name"))
	}
	q, p := s.JobQueue, field.NewPath("jobQueue")
	if v := *q.BackoffSeconds; v < 1 || v > 3600 {
		errs = append(errs, field.Invalid(p.Child("backoffSeconds"), v, "must be between 1 and 3600"))
	}
	if v := *q.MaxBackoffSeconds; v < *q.BackoffSeconds || v > 3600 {
		errs = append(errs, field.Invalid(p.Child("maxBackoffSeconds"), v, "must be between backoffSeconds and 3600"))
	}
	if v := *q.PartialGroupSeconds; v < 10 || v > 86400 {
		errs = append(errs, field.Invalid(p.Child("partialGroupSeconds"), v, "must be between 10 and 86400"))
	}
	return errs
}

// DecodeShared reads a SharedConfiguration document, the file name,
// strictly (a misspelt field is an error), defaults and validates it; all
// errors together, each at its line: "shared.yaml:4:
// jobQueue.backoffSeconds: Invalid value: 0: ...". A document of the old
// kind, SchedulerServices, is read as a SharedConfiguration, with a
// warning on logger naming the new kind.
func DecodeShared(logger klog.Logger, name string, data []byte) (*SharedConfiguration, error) {
	s := &SharedConfiguration{}
	root, err := yamlfile.DecodeObject(name, data, "a "+SharedKind+" ("+SharedAPIVersion+")", s)
	if err != nil {
		return nil, err
	}
	if s.APIVersion == "" && s.Kind == "" {
		return nil, fmt.Errorf("%s: apiVersion and kind: required (%s, %s)", name, SharedAPIVersion, SharedKind)
	}
	if s.Kind == DeprecatedSharedKind {
		logger.Info("Warning: kind "+DeprecatedSharedKind+" is deprecated; name it "+SharedKind+" (same fields)", "file", name)
		s.Kind = SharedKind
	}
	apiVersion, kind := s.APIVersion, s.Kind
	s.Default()
	s.APIVersion, s.Kind = apiVersion, kind
	if errs := s.Validate(); len(errs) > 0 {
		return nil, yamlfile.FieldError(name, root, errs)
	}
	return s, nil
}

// ReadShared reads a SharedConfiguration file (DecodeShared); the empty
// path gives the defaults.
func ReadShared(logger klog.Logger, path string) (*SharedConfiguration, error) {
	if path == "" {
		return DefaultShared(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("shared configuration: %w", err)
	}
	return DecodeShared(logger, path, data)
}
