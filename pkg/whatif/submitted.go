package whatif

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/simcluster"
)

// Submitted is what the cluster already has of a job that was submitted:
// when a gang is stuck, whatif reads it as itself rather than as a copy.
type Submitted struct {
	// Pods is how many of the job's pods the cluster has, Bound how many
	// of them are bound.
	Pods  int `json:"pods"`
	Bound int `json:"bound"`
	// Says is what the cluster says of the job now, one line each: every
	// PodGroup's phase, queue position and Admitted condition, and the
	// PodScheduled condition of the pods that wait (pods that say the same
	// share a line).
	Says []string `json:"says,omitempty"`
}

// resolve returns the job as the cluster has it, and what the cluster
// says of it; nil Submitted when it has none of it. The pods of each of
// the manifests' objects that the cluster has (a Pod by its name, a
// workload's by their controller: a Job, ReplicaSet or StatefulSet of its
// name, a Deployment's ReplicaSet) stand for as many of the pods made
// from the manifests; the rest are made as the controller would. A
// PodGroup the cluster has is the cluster's.
func (j *Job) resolve(snap *Snapshot) (*Job, *Submitted, error) {
	taken := map[string]bool{}
	for _, p := range snap.Pods {
		taken[p.Namespace+"/"+p.Name] = true
	}
	out := &Job{existing: map[string]bool{}}
	var theirs []*corev1.Pod
	next := 0
	makers := j.makers
	if makers == nil {
		// A Job built in code: each pod stands for itself.
		for _, p := range j.Pods {
			makers = append(makers, maker{kind: "Pod", namespace: p.Namespace, name: p.Name, pods: 1})
		}
	}
	for _, m := range makers {
		made := j.Pods[next : next+m.pods]
		next += m.pods
		have := m.existing(snap.Pods)
		theirs = append(theirs, have...)
		for _, p := range have {
			out.existing[p.Namespace+"/"+p.Name] = true
		}
		out.Pods = append(out.Pods, have...)
		for _, p := range made[min(len(have), len(made)):] {
			key := p.Namespace + "/" + p.Name
			if taken[key] {
				return nil, nil, fmt.Errorf("pod %s: the cluster has a pod of that name that is not the %s %s's", key, m.kind, m.name)
			}
			out.Pods = append(out.Pods, p)
		}
	}
	groups := map[string]*schedulingv1alpha1.PodGroup{}
	for _, o := range snap.Aisched {
		if g, ok := o.(*schedulingv1alpha1.PodGroup); ok {
			groups[g.Namespace+"/"+g.Name] = g
		}
	}
	for _, g := range j.PodGroups {
		key := g.Namespace + "/" + g.Name
		if groups[key] != nil {
			out.existing["podgroup:"+key] = true
			continue
		}
		out.PodGroups = append(out.PodGroups, g)
	}
	if len(theirs) == 0 && len(out.existing) == 0 {
		return out, nil, nil
	}
	return out, says(out, theirs, groups), nil
}

// existing returns the pods of snapshot that m made, by name.
func (m maker) existing(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Namespace != m.namespace || p.DeletionTimestamp != nil {
			continue
		}
		ctrl := metav1.GetControllerOf(p)
		var mine bool
		switch {
		case m.kind == "Pod":
			mine = p.Name == m.name
		case ctrl == nil:
		case m.kind == "Deployment":
			// A Deployment's pods are its ReplicaSets', named after it and
			// the template's hash, which the pods carry as a label.
			hash, ok := p.Labels["pod-template-hash"]
			mine = ok && ctrl.Kind == "ReplicaSet" && ctrl.Name == m.name+"-"+hash
		default:
			mine = ctrl.Kind == m.kind && ctrl.Name == m.name
		}
		if mine {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// says is what the cluster says of the job: its groups' status and its
// waiting pods' conditions.
func says(job *Job, theirs []*corev1.Pod, groups map[string]*schedulingv1alpha1.PodGroup) *Submitted {
	s := &Submitted{Pods: len(theirs)}
	var keys []string
	for _, g := range job.PodGroups {
		keys = append(keys, g.Namespace+"/"+g.Name)
	}
	for key := range job.existing {
		if k, ok := strings.CutPrefix(key, "podgroup:"); ok {
			keys = append(keys, k)
		}
	}
	for _, p := range theirs {
		if k, ok := podgroup.KeyOf(p); ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		if g := groups[k]; g != nil {
			s.Says = append(s.Says, groupSays(g))
		}
	}
	var waits sayings
	for _, p := range theirs {
		if p.Spec.NodeName != "" {
			s.Bound++
			continue
		}
		line := "pending, not yet tried by the scheduler"
		if why := simcluster.NotScheduled(p); why != nil {
			line = why.Reason + ": " + why.Message
		}
		waits.add(p, line)
	}
	s.Says = append(s.Says, waits.lines()...)
	return s
}

// sayings gathers pods by what they say, in the order first said, so that
// thirty pods that wait for one reason take one line.
type sayings struct {
	order []string
	pods  map[string][]string
}

func (s *sayings) add(p *corev1.Pod, line string) {
	if s.pods == nil {
		s.pods = map[string][]string{}
	}
	if s.pods[line] == nil {
		s.order = append(s.order, line)
	}
	s.pods[line] = append(s.pods[line], p.Namespace+"/"+p.Name)
}

// lines are "pods a, b and 3 more: what they say".
func (s *sayings) lines() []string {
	out := make([]string, 0, len(s.order))
	for _, line := range s.order {
		out = append(out, podList(s.pods[line])+": "+line)
	}
	return out
}

// groupSays is a PodGroup's status in one line.
func groupSays(g *schedulingv1alpha1.PodGroup) string {
	line := fmt.Sprintf("pod group %s/%s: %s", g.Namespace, g.Name, orUnset(string(g.Status.Phase)))
	if g.Status.QueuePosition > 0 {
		line += fmt.Sprintf(", position %d in the queue", g.Status.QueuePosition)
	}
	line += fmt.Sprintf(", %d of %d members bound", g.Status.Scheduled, g.Spec.MinMember)
	if c := meta.FindStatusCondition(g.Status.Conditions, schedulingv1alpha1.ConditionAdmitted); c != nil {
		line += fmt.Sprintf(": %s: %s", c.Reason, c.Message)
	}
	return line
}

func orUnset(phase string) string {
	if phase == "" {
		return "no phase yet"
	}
	return phase
}

// podList names pods: "pod a", "pods a, b and c", "pods a, b and 5 more".
func podList(names []string) string {
	switch n := len(names); {
	case n == 1:
		return "pod " + names[0]
	case n <= 3:
		return "pods " + strings.Join(names[:n-1], ", ") + " and " + names[n-1]
	default:
		return fmt.Sprintf("pods %s and %d more", strings.Join(names[:2], ", "), n-2)
	}
}

// unbound returns the pod as a copy created anew: unbound, without the
// cards it holds and without a status, for a cluster that does not have
// it (tryEmpty places the job's pods on an empty cluster).
func unbound(p *corev1.Pod) *corev1.Pod {
	c := p.DeepCopy()
	c.ResourceVersion, c.Spec.NodeName = "", ""
	c.Status = corev1.PodStatus{Phase: corev1.PodPending}
	delete(c.Annotations, gpu.AssignedAnnotation)
	delete(c.Annotations, gpu.AssignedUUIDsAnnotation)
	return c
}
