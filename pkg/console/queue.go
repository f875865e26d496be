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
	writeJSON(w, http.StatusOK, BuildWaitingWork(pods.Items, groups, quotas.Items))
}

// BuildWaitingWork gathers the pending pods, the groups that wait (not
// every member scheduled), and the quotas.
func BuildWaitingWork(pods []corev1.Pod, groups []schedulingv1alpha1.PodGroup, quotas []corev1.ResourceQuota) WaitingWork {
	out := WaitingWork{Groups: []WaitingGroup{}, Pods: []WaitingPod{}, Quotas: []QuotaUse{}}
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
