package scenario

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/podload"
	simtrace "github.com/aisched/aisched/pkg/sim/trace"
	"github.com/aisched/aisched/pkg/util/yamlfile"
)

// Load reads, decodes, defaults and validates a scenario file. Relative
// schedulerConfig paths are made relative to the file's directory.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	s, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	for i := range s.Policies {
		p := &s.Policies[i]
		if p.SchedulerConfig == "" {
			continue
		}
		if !filepath.IsAbs(p.SchedulerConfig) {
			p.SchedulerConfig = filepath.Join(filepath.Dir(path), p.SchedulerConfig)
		}
		if _, err := os.Stat(p.SchedulerConfig); err != nil {
			return nil, fmt.Errorf("%s: policies[%d].schedulerConfig: %w", path, i, err)
		}
	}
	return s, nil
}

// LoadAll loads the scenario files named, each directory standing for its
// *.yaml files in name order. Two files may not name the same scenario.
func LoadAll(paths []string) ([]*Scenario, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		in, err := filepath.Glob(filepath.Join(p, "*.yaml"))
		if err != nil {
			return nil, err
		}
		if len(in) == 0 {
			return nil, fmt.Errorf("%s: no scenario files (*.yaml)", p)
		}
		files = append(files, in...)
	}
	var out []*Scenario
	names := map[string]string{}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			return nil, err
		}
		if prev, dup := names[s.Name]; dup {
			return nil, fmt.Errorf("%s and %s both name scenario %s", prev, f, s.Name)
		}
		names[s.Name] = f
		out = append(out, s)
	}
	return out, nil
}

// Parse decodes, defaults and validates the content of a scenario file;
// name is used in error messages.
func Parse(name string, data []byte) (*Scenario, error) {
	var s Scenario
	root, err := yamlfile.Decode(name, data, "a Scenario with a cluster, policies and a workload", &s)
	if err != nil {
		return nil, err
	}
	s.setDefaults()
	if errs := s.Validate(); len(errs) > 0 {
		return nil, yamlfile.FieldError(name, root, errs)
	}
	return &s, nil
}

func (s *Scenario) setDefaults() {
	clusterfile.SetNodePoolDefaults(s.Cluster.NodePools)
	if len(s.Seeds) == 0 {
		s.Seeds = slices.Clone(DefaultSeeds)
	}
	if s.Settle.Duration == 0 {
		s.Settle.Duration = DefaultSettle
	}
	if s.TopologySlowdown == 0 {
		s.TopologySlowdown = 1
	}
	if len(s.Metrics) == 0 {
		s.Metrics = slices.Clone(MetricKeys)
		if s.Trace != nil {
			s.Metrics = slices.Clone(TraceMetricKeys)
		}
		if len(s.Topologies) == 0 {
			// The topology metrics measure scenarios with topologies.
			s.Metrics = slices.DeleteFunc(s.Metrics, func(k string) bool { return slices.Contains(TopologyMetricKeys, k) })
		}
		if len(s.Queues) > 0 {
			s.Metrics = append(s.Metrics, QueueMetricKeys...)
		}
	}
	if s.Trace != nil && s.Trace.Inflate == 0 {
		s.Trace.Inflate = DefaultInflate
	}
	for i := range s.Policies {
		if p := &s.Policies[i]; p.Profile == "" {
			p.Profile = p.Name
		}
		if p := &s.Policies[i]; p.Admission == "" && len(s.Queues) > 0 {
			p.Admission = AdmissionQueues
		}
	}
	for i := range s.Workload {
		it := &s.Workload[i]
		if it.Count == 0 {
			it.Count = 1
		}
		if it.Namespace == "" {
			it.Namespace = metav1.NamespaceDefault
		}
	}
}

// Validate checks a decoded and defaulted scenario.
func (s *Scenario) Validate() field.ErrorList {
	var errs field.ErrorList
	if s.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), s.APIVersion, []string{APIVersion}))
	}
	if s.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), s.Kind, []string{Kind}))
	}
	errs = append(errs, dnsLabel(field.NewPath("name"), s.Name)...)
	if s.Trace != nil {
		errs = append(errs, s.validateTrace()...)
	} else {
		errs = append(errs, clusterfile.ValidateNodePools(s.Cluster.NodePools, field.NewPath("cluster", "nodePools"))...)
	}

	policies := field.NewPath("policies")
	if len(s.Policies) == 0 {
		errs = append(errs, field.Required(policies, "at least one policy, e.g. {name: default-scheduler}"))
	}
	names := sets.New[string]()
	for i, p := range s.Policies {
		pp := policies.Index(i)
		errs = append(errs, dnsLabel(pp.Child("name"), p.Name)...)
		if names.Has(p.Name) {
			errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
		}
		names.Insert(p.Name)
	}
	switch ts := s.TopologySlowdown; {
	case math.IsNaN(ts) || ts < 1 || ts > MaxTopologySlowdown:
		errs = append(errs, field.Invalid(field.NewPath("topologySlowdown"), ts, fmt.Sprintf("want 1 (no slowdown) to %d", MaxTopologySlowdown)))
	case ts > 1 && len(s.Topologies) == 0:
		errs = append(errs, field.Invalid(field.NewPath("topologySlowdown"), ts, "slows gangs spread over the domains of topologies: give topologies"))
	}
	if s.Settle.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("settle"), s.Settle.String(), "must not be negative"))
	}
	if len(sets.New(s.Seeds...)) != len(s.Seeds) {
		errs = append(errs, field.Invalid(field.NewPath("seeds"), s.Seeds, "seeds must differ"))
	}
	keys := MetricKeys
	if s.Trace != nil {
		keys = TraceMetricKeys
	}
	if len(s.Queues) > 0 {
		keys = slices.Concat(keys, QueueMetricKeys)
	}
	for i, m := range s.Metrics {
		if !slices.Contains(keys, m) {
			errs = append(errs, field.NotSupported(field.NewPath("metrics").Index(i), m, keys))
		}
	}
	if s.Trace != nil {
		return errs
	}

	namespaces := sets.New(metav1.NamespaceDefault)
	for i, ns := range s.Namespaces {
		np := field.NewPath("namespaces").Index(i)
		errs = append(errs, dnsLabel(np.Child("name"), ns.Name)...)
		if namespaces.Has(ns.Name) {
			errs = append(errs, field.Duplicate(np.Child("name"), ns.Name))
		}
		namespaces.Insert(ns.Name)
		for _, r := range sets.List(sets.KeySet(ns.Quota)) {
			qp := np.Child("quota").Key(r)
			switch q := ns.Quota[r]; {
			case len(validation.IsQualifiedName(r)) > 0:
				errs = append(errs, field.Invalid(qp, r, strings.Join(validation.IsQualifiedName(r), "; ")))
			case q.Sign() < 0:
				errs = append(errs, field.Invalid(qp, q.String(), "must not be negative"))
			case q.Cmp(maxQuota) > 0:
				errs = append(errs, field.Invalid(qp, q.String(), "must be at most "+maxQuota.String()))
			}
		}
	}
	errs = append(errs, s.validateTopologies()...)
	errs = append(errs, s.validateWorkload(namespaces)...)
	errs = append(errs, s.validateQueues()...)
	return errs
}

// validateTopologies checks the scenario's topologies as the apiserver
// checks an aischedtopology: names, 1 to 8 levels, each a label key, once.
func (s *Scenario) validateTopologies() field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, t := range s.Topologies {
		tp := field.NewPath("topologies").Index(i)
		errs = append(errs, dnsLabel(tp.Child("name"), t.Name)...)
		if names.Has(t.Name) {
			errs = append(errs, field.Duplicate(tp.Child("name"), t.Name))
		}
		names.Insert(t.Name)
		if len(t.Levels) < 1 || len(t.Levels) > clusterfile.MaxTopologyLevels {
			errs = append(errs, field.Invalid(tp.Child("levels"), len(t.Levels), fmt.Sprintf("want 1 to %d levels, coarsest first", clusterfile.MaxTopologyLevels)))
		}
		levels := sets.New[string]()
		for j, l := range t.Levels {
			for _, msg := range validation.IsQualifiedName(l) {
				errs = append(errs, field.Invalid(tp.Child("levels").Index(j), l, msg))
			}
			if levels.Has(l) {
				errs = append(errs, field.Duplicate(tp.Child("levels").Index(j), l))
			}
			levels.Insert(l)
		}
	}
	return errs
}

// maxQuota bounds a quota: more than every node of the largest cluster
// holds of anything.
var maxQuota = resource.MustParse("1P")

// validateTrace checks a trace replay: the trace's files and inflate, and
// no cluster or workload beside it.
func (s *Scenario) validateTrace() field.ErrorList {
	var errs field.ErrorList
	tp := field.NewPath("trace")
	for _, f := range []struct{ name, value string }{{"nodes", s.Trace.Nodes}, {"pods", s.Trace.Pods}} {
		switch {
		case f.value == "":
			errs = append(errs, field.Required(tp.Child(f.name), "a file name in the trace directory"))
		case filepath.Base(f.value) != f.value:
			errs = append(errs, field.Invalid(tp.Child(f.name), f.value, "a file name, without a directory: the directory is given with --trace-dir"))
		}
	}
	if err := simtrace.CheckInflate(s.Trace.Inflate); err != nil {
		errs = append(errs, field.Invalid(tp.Child("inflate"), s.Trace.Inflate, fmt.Sprintf("must be between 1 and %d", simtrace.MaxInflate)))
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"cluster", len(s.Cluster.NodePools) > 0}, {"workload", len(s.Workload) > 0}, {"namespaces", len(s.Namespaces) > 0}, {"queues", len(s.Queues) > 0}} {
		if f.set {
			errs = append(errs, field.Forbidden(field.NewPath(f.name), "a trace replay takes its nodes and pods from the trace"))
		}
	}
	return errs
}

func (s *Scenario) validateWorkload(namespaces sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	workload := field.NewPath("workload")
	if len(s.Workload) == 0 {
		errs = append(errs, field.Required(workload, "at least one item"))
	}
	items := sets.New[string]()
	members := map[string]int{}
	nodes := sets.New[string]()
	for _, p := range s.Cluster.NodePools {
		for i := range p.Count {
			nodes.Insert(p.NodeName(i))
		}
	}
	for i := range s.Workload {
		it := &s.Workload[i]
		ip := workload.Index(i)
		errs = append(errs, dnsLabel(ip.Child("name"), it.Name)...)
		if items.Has(it.Name) {
			errs = append(errs, field.Duplicate(ip.Child("name"), it.Name))
		}
		items.Insert(it.Name)
		if it.Count < 1 || it.Count > MaxReplicas {
			errs = append(errs, field.Invalid(ip.Child("count"), it.Count, fmt.Sprintf("must be between 1 and %d", MaxReplicas)))
		}
		if !namespaces.Has(it.Namespace) {
			errs = append(errs, field.NotFound(ip.Child("namespace"), it.Namespace))
		}
		for _, f := range []struct {
			name string
			d    Duration
		}{{"arrival", it.Arrival}, {"interval", it.Interval}, {"duration", it.Duration}} {
			if f.d.Duration < 0 {
				errs = append(errs, field.Invalid(ip.Child(f.name), f.d.String(), "must not be negative"))
			}
		}
		if len(it.Requests) == 0 {
			errs = append(errs, field.Required(ip.Child("requests"), "e.g. {cpu: 1, memory: 1Gi}"))
		}
		for _, r := range sets.List(sets.KeySet(it.Requests)) {
			if msgs := validation.IsQualifiedName(r); len(msgs) > 0 {
				errs = append(errs, field.Invalid(ip.Child("requests").Key(r), r, strings.Join(msgs, "; ")))
			} else if q := it.Requests[r]; q.Sign() < 0 {
				errs = append(errs, field.Invalid(ip.Child("requests").Key(r), q.String(), "must not be negative"))
			} else {
				errs = append(errs, clusterfile.Bounded(ip.Child("requests").Key(r), q.Quantity, corev1.ResourceName(r))...)
				if corev1.ResourceName(r) == gpu.ResourceName && q.MilliValue()%1000 != 0 {
					errs = append(errs, field.Invalid(ip.Child("requests").Key(r), q.String(), "must be a whole number of cards (a share is the "+gpu.MilliAnnotation+" annotation)"))
				}
			}
		}
		if it.Load != "" {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{podload.ExpectedLoadAnnotation: it.Load}}}
			if _, err := podload.Of(pod); err != nil {
				errs = append(errs, field.Invalid(ip.Child("load"), it.Load, err.Error()))
			}
		}
		if it.Node != "" && !nodes.Has(it.Node) {
			errs = append(errs, field.NotFound(ip.Child("node"), it.Node))
		}
		if it.GangSize != 0 {
			switch {
			case it.Group != nil:
				errs = append(errs, field.Forbidden(ip.Child("gangSize"), "an item's pods are in its group or in gangs of gangSize, not both"))
			case it.GangSize < 1 || it.GangSize > podgroup.MaxMinAvailable:
				errs = append(errs, field.Invalid(ip.Child("gangSize"), it.GangSize, fmt.Sprintf("must be between 1 and %d", podgroup.MaxMinAvailable)))
			case it.Count%it.GangSize != 0:
				errs = append(errs, field.Invalid(ip.Child("gangSize"), it.GangSize, fmt.Sprintf("must divide count %d: the last gang could never gather", it.Count)))
			}
		}
		if g := it.Group; g != nil {
			gp := ip.Child("group")
			if msgs := validation.IsDNS1123Subdomain(g.Name); len(msgs) > 0 {
				errs = append(errs, field.Invalid(gp.Child("name"), g.Name, strings.Join(msgs, "; ")))
			}
			if g.MinAvailable < 1 {
				errs = append(errs, field.Invalid(gp.Child("minAvailable"), g.MinAvailable, "must be at least 1"))
			}
			members[it.Namespace+"/"+g.Name] += it.Count
		}
	}
	// A group that can never gather is a scenario mistake, not a result.
	for i, it := range s.Workload {
		if g := it.Group; g != nil && g.MinAvailable > members[it.Namespace+"/"+g.Name] {
			errs = append(errs, field.Invalid(workload.Index(i).Child("group", "minAvailable"), g.MinAvailable,
				fmt.Sprintf("the workload has only %d members of group %s", members[it.Namespace+"/"+g.Name], g.Name)))
		}
	}
	return errs
}

func dnsLabel(p *field.Path, v string) field.ErrorList {
	if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, v, strings.Join(msgs, "; "))}
	}
	return nil
}
