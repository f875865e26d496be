package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/podgroup"
)

// WaitingWork is what waits to run: the pod groups the job queue holds,
// the pending pods, and the namespaces' quota use.
type WaitingWork struct {
	Groups []WaitingGroup `json:"groups"`
	Pods   []WaitingPod   `json:"pods"`
	Quotas []QuotaUse     `json:"quotas"`
	// TeamQueues are aisched's queues as a tree, parents before their
	// children; TeamQueuesRefused says why they are missing when the
	// user may not list them.
	TeamQueues        []TeamQueue `json:"teamQueues"`
	TeamQueuesRefused string      `json:"teamQueuesRefused,omitempty"`
}

// TeamQueue is one of aisched's queues (aischedqueues) with its GPUs, as
// the job queue last counted them: the guarantee against the use, what of
// the use is borrowed and from whom.
type TeamQueue struct {
	Name   string `json:"name"`
	Parent string `json:"parent,omitempty"`
	// Depth is the queue's level in the tree, 0 for a top-level queue.
	Depth      int    `json:"depth"`
	Guaranteed string `json:"guaranteed"`
	Used       string `json:"used"`
	Borrowed   string `json:"borrowed"`
	FairShare  string `json:"fairShare"`
	// Percent is used of guaranteed, 0 when nothing is guaranteed.
	Percent     float64  `json:"percent"`
	Admitted    int32    `json:"admitted"`
	Waiting     int32    `json:"waiting"`
	BorrowsFrom []string `json:"borrowsFrom,omitempty"`
	// Invalid is the message of a Valid=False condition: the queue's work
	// waits until it is mended.
	Invalid string `json:"invalid,omitempty"`
}

// WaitingGroup is a pod group not yet admitted whole.
type WaitingGroup struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase,omitempty"`
	MinMember int32  `json:"minMember"`
	Scheduled int32  `json:"scheduled"`
	// Pending counts the group's pods that wait.
	Pending int `json:"pending"`
	// Position is the job queue's position of the group, from 1; 0 when
	// it has none.
	Position int32 `json:"position,omitempty"`
	// Reason and Message are the Admitted condition's: why it waits.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Ahead lists the groups before it in the queue, nearest last.
	Ahead []string `json:"ahead,omitempty"`
}

// WaitingPod is a pod not yet bound.
type WaitingPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Group     string `json:"group,omitempty"`
	Scheduler string `json:"scheduler"`
	// GPU is what it asks of GPUs, in words ("2 GPUs", "300/1000 of each
	// of 2 GPUs"); its request when it cannot be read.
	GPU string `json:"gpu,omitempty"`
	// Reason and Message are its PodScheduled condition's, written by the
	// job queue or the scheduler.
	Reason  string      `json:"reason,omitempty"`
	Message string      `json:"message,omitempty"`
	Since   metav1.Time `json:"since"`
}

// QuotaUse is one ResourceQuota's use.
type QuotaUse struct {
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Resources []QuotaResource `json:"resources"`
}

// QuotaResource is one resource of a quota.
type QuotaResource struct {
	Name string `json:"name"`
	Used string `json:"used"`
	Hard string `json:"hard"`
	// Percent is used of hard, 0 when hard is 0.
	Percent float64 `json:"percent"`
}

// maxAhead bounds the groups listed ahead of one.
const maxAhead = 10

func (s *Server) waitingWork(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	ctx := r.Context()
	ns := r.URL.Query().Get("namespace")
	pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending"})
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	var groups []schedulingv1alpha1.PodGroup
	if list, err := c.aisched.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{}); err == nil {
		groups = list.Items
	} else if !apierrors.IsNotFound(err) {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	quotas, err := c.kube.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	out := BuildWaitingWork(pods.Items, groups, quotas.Items)
	// Queues are cluster-scoped: a user who may read only a namespace is
	// told why they are missing; a cluster without aisched's CRDs has none.
	switch list, err := c.aisched.AischedV1alpha1().AischedQueues().List(ctx, metav1.ListOptions{}); {
	case err == nil:
		out.TeamQueues = BuildTeamQueues(list.Items)
	case apierrors.IsForbidden(err):
		out.TeamQueuesRefused = err.Error()
	case !apierrors.IsNotFound(err):
		writeError(w, http.StatusBadGateway, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// BuildTeamQueues orders queues as their tree (parents first, siblings by
// name; a queue whose parent is missing or in a cycle at the top) with
// their GPU counts.
func BuildTeamQueues(queues []aischedv1alpha1.Queue) []TeamQueue {
	children := map[string][]*aischedv1alpha1.Queue{}
	byName := map[string]bool{}
	for i := range queues {
		byName[queues[i].Name] = true
	}
	for i := range queues {
		q := &queues[i]
		parent := q.Spec.Parent
		if !byName[parent] {
			parent = ""
		}
		children[parent] = append(children[parent], q)
	}
	for _, list := range children {
		slices.SortFunc(list, func(a, b *aischedv1alpha1.Queue) int { return strings.Compare(a.Name, b.Name) })
	}
	out := []TeamQueue{}
	seen := map[string]bool{}
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, q := range children[parent] {
			if seen[q.Name] {
				continue
			}
			seen[q.Name] = true
			out = append(out, teamQueueOf(q, depth))
			walk(q.Name, depth+1)
		}
	}
	walk("", 0)
	// Queues in a cycle of parents are reached from no top-level queue.
	for i := range queues {
		if !seen[queues[i].Name] {
			seen[queues[i].Name] = true
			out = append(out, teamQueueOf(&queues[i], 0))
		}
	}
	return out
}

func teamQueueOf(q *aischedv1alpha1.Queue, depth int) TeamQueue {
	tq := TeamQueue{Name: q.Name, Parent: q.Spec.Parent, Depth: depth, Guaranteed: "0", Used: "0", Borrowed: "0", FairShare: "0",
		Admitted: q.Status.AdmittedGroups, Waiting: q.Status.WaitingGroups, BorrowsFrom: q.Status.BorrowsFrom}
	if g := q.Status.GPU; g != nil {
		tq.Guaranteed, tq.Used, tq.Borrowed, tq.FairShare = g.Guaranteed.String(), g.Used.String(), g.Borrowed.String(), g.FairShare.String()
		if g.Guaranteed.MilliValue() > 0 {
			tq.Percent = float64(g.Used.MilliValue()) * 100 / float64(g.Guaranteed.MilliValue())
		}
	}
	if c := meta.FindStatusCondition(q.Status.Conditions, aischedv1alpha1.ConditionQueueValid); c != nil && c.Status == metav1.ConditionFalse {
		tq.Invalid = c.Message
	}
	return tq
}

// BuildWaitingWork gathers the pending pods, the groups that wait (not
// every member scheduled), and the quotas.
func BuildWaitingWork(pods []corev1.Pod, groups []schedulingv1alpha1.PodGroup, quotas []corev1.ResourceQuota) WaitingWork {
	out := WaitingWork{Groups: []WaitingGroup{}, Pods: []WaitingPod{}, Quotas: []QuotaUse{}, TeamQueues: []TeamQueue{}}
	pending := map[string]int{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		wp := WaitingPod{Namespace: p.Namespace, Name: p.Name, Scheduler: p.Spec.SchedulerName, Since: p.CreationTimestamp}
		if r, err := gpu.ParseRequest(p); err == nil {
			wp.GPU = r.Describe()
		} else if n := gpu.RequestedCards(p); n > 0 {
			wp.GPU = fmt.Sprintf("%d nvidia.com/gpu", n)
		}
		if key, ok := podgroup.KeyOf(p); ok {
			wp.Group = key
			pending[key]++
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				wp.Reason, wp.Message = cond.Reason, cond.Message
			}
		}
		out.Pods = append(out.Pods, wp)
	}
	slices.SortFunc(out.Pods, func(a, b WaitingPod) int {
		return cmp.Or(a.Since.Compare(b.Since.Time), strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name))
	})

	for i := range groups {
		g := &groups[i]
		key := g.Namespace + "/" + g.Name
		if g.Status.Scheduled >= g.Spec.MinMember && pending[key] == 0 {
			continue
		}
		wg := WaitingGroup{
			Namespace: g.Namespace, Name: g.Name, Phase: string(g.Status.Phase), MinMember: g.Spec.MinMember,
			Scheduled: g.Status.Scheduled, Pending: pending[key], Position: g.Status.QueuePosition,
		}
		if cond := meta.FindStatusCondition(g.Status.Conditions, schedulingv1alpha1.ConditionAdmitted); cond != nil {
			wg.Reason, wg.Message = cond.Reason, cond.Message
		}
		out.Groups = append(out.Groups, wg)
	}
	slices.SortFunc(out.Groups, func(a, b WaitingGroup) int {
		// Queued groups by position, then the rest by name.
		ap, bp := a.Position, b.Position
		if ap == 0 {
			ap = 1 << 30
		}
		if bp == 0 {
			bp = 1 << 30
		}
		return cmp.Or(cmp.Compare(ap, bp), strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name))
	})
	for i := range out.Groups {
		if out.Groups[i].Position == 0 {
			continue
		}
		for j := max(0, i-maxAhead); j < i; j++ {
			if out.Groups[j].Position > 0 {
				out.Groups[i].Ahead = append(out.Groups[i].Ahead, out.Groups[j].Namespace+"/"+out.Groups[j].Name)
			}
		}
	}

	for _, q := range quotas {
		qu := QuotaUse{Namespace: q.Namespace, Name: q.Name}
		names := make([]string, 0, len(q.Status.Hard))
		for n := range q.Status.Hard {
			names = append(names, string(n))
		}
		slices.Sort(names)
		for _, n := range names {
			hard := q.Status.Hard[corev1.ResourceName(n)]
			used := q.Status.Used[corev1.ResourceName(n)]
			qr := QuotaResource{Name: n, Used: used.String(), Hard: hard.String()}
			if hard.MilliValue() > 0 {
				qr.Percent = float64(used.MilliValue()) * 100 / float64(hard.MilliValue())
			}
			qu.Resources = append(qu.Resources, qr)
		}
		out.Quotas = append(out.Quotas, qu)
	}
	slices.SortFunc(out.Quotas, func(a, b QuotaUse) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}
