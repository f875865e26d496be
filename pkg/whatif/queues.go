package whatif

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/queuetree"
	"github.com/aisched/aisched/pkg/simcluster"
)

// QueueAnswer is what the team queues (docs/queues.md) say of a job: its
// queue, the queue's cards as the cluster stands before the job, where
// the job stands against the guarantee and the limit, and which queues
// it takes capacity back from.
type QueueAnswer struct {
	// Queue names the job's queue ("aischedqueue vision"), empty when the
	// queue the pods name cannot hold them (Problem says why).
	Queue   string `json:"queue,omitempty"`
	Problem string `json:"problem,omitempty"`
	// Guaranteed, Used and Limit are the queue's cards before the job
	// (Limit empty for none), FairShare its fair share with the job
	// submitted; Job what the job asks.
	Guaranteed string `json:"guaranteed,omitempty"`
	Used       string `json:"used,omitempty"`
	Limit      string `json:"limit,omitempty"`
	FairShare  string `json:"fairShare,omitempty"`
	Job        string `json:"job,omitempty"`
	// BorrowsFrom are the queues whose unused guarantees the queue
	// borrows, as "sandbox: 4".
	BorrowsFrom []string `json:"borrowsFrom,omitempty"`
	// Standing says where the job stands, in words: within the guarantee
	// (first, taking back what others borrowed), beyond it (it borrows,
	// after the work of queues with a lower share), or past a limit.
	Standing string `json:"standing,omitempty"`
	// TakenBack are the queues the job takes capacity back from, each
	// with the pods taken ("aischedqueue sandbox: ns/a, ns/b").
	TakenBack []string `json:"takenBack,omitempty"`
}

// queueOf tells the job's queue, nil when the job is in no queue. tree
// is the queues as they stood before the job, with the job the queues
// with it submitted; preempted are the pods the job's placement deleted,
// looked up in the snapshot's pods.
func queueOf(c simcluster.SnapshotCluster, tree, with *queuetree.Tree, job *Job, preempted []string, snap *Snapshot) *QueueAnswer {
	if len(job.Pods) == 0 {
		return nil
	}
	name, problem := c.QueueOf(job.Pods[0])
	if problem != "" {
		return &QueueAnswer{Problem: problem}
	}
	if name == "" || tree == nil || tree.Queue(name) == nil {
		return nil
	}
	leaf := tree.Queue(name)
	ans := &QueueAnswer{Queue: leaf.Object}
	i := slices.Index(tree.Names(), queuetree.GPU)
	var need int64
	for _, p := range job.Pods {
		if r, err := gpu.ParseRequest(p); err == nil {
			need += r.TotalMilli()
		}
	}
	ans.Job = queuetree.Format(queuetree.GPU, need)
	if i < 0 || !leaf.Listed(i) {
		ans.Standing = fmt.Sprintf("%s does not account cards: the job is admitted against the free capacity alone", leaf.Object)
	} else {
		ans.describe(tree, leaf, i, need)
		if with != nil && with.Queue(name) != nil {
			ans.FairShare = queuetree.Format(queuetree.GPU, with.Queue(name).FairShare()[i])
		}
	}
	byKey := map[string]*corev1.Pod{}
	for _, p := range snap.Pods {
		byKey[p.Namespace+"/"+p.Name] = p
	}
	from := map[string][]string{}
	var queues []string
	for _, key := range preempted {
		p, ok := byKey[key]
		if !ok {
			continue
		}
		q, _ := c.QueueOf(p)
		if n := tree.Queue(q); n != nil && q != name {
			if _, seen := from[n.Object]; !seen {
				queues = append(queues, n.Object)
			}
			from[n.Object] = append(from[n.Object], key)
		}
	}
	slices.Sort(queues)
	for _, q := range queues {
		ans.TakenBack = append(ans.TakenBack, q+": "+strings.Join(from[q], ", "))
	}
	return ans
}

// describe fills the queue's cards and the job's standing against them.
func (a *QueueAnswer) describe(tree *queuetree.Tree, leaf *queuetree.Node, i int, need int64) {
	card := func(v int64) string { return queuetree.Format(queuetree.GPU, v) }
	used, guaranteed := leaf.Used()[i], leaf.Guaranteed()[i]
	a.Guaranteed, a.Used = card(guaranteed), card(used)
	if l := leaf.Limits()[i]; l != queuetree.Unlimited {
		a.Limit = card(l)
	}
	for _, l := range tree.Lenders(leaf, i) {
		a.BorrowsFrom = append(a.BorrowsFrom, fmt.Sprintf("%s: %s", l.Queue.Name, card(l.Amount)))
	}
	switch over, at := tree.OverLimit(leaf, queuetree.Vec(oneResource(len(tree.Names()), i, need))); {
	case over != nil:
		a.Standing = fmt.Sprintf("past a limit: %s limits %s to %s and uses %s; the job's %s cards wait until its use falls",
			over.Object, tree.Names()[at], card(over.Limits()[at]), card(over.Used()[at]), card(need))
	case tree.Within(leaf, queuetree.Vec(oneResource(len(tree.Names()), i, need))):
		a.Standing = fmt.Sprintf("within the guarantee: %s uses %s of its %s guaranteed cards, and the job's %s fit in it; "+
			"the job goes before borrowing work and takes back what other queues borrowed",
			leaf.Object, card(used), card(guaranteed), card(need))
	default:
		a.Standing = fmt.Sprintf("beyond the guarantee: %s uses %s of its %s guaranteed cards, and the job's %s would borrow; "+
			"it comes after work within guarantees and after borrowing work of queues with a lower share, and takes back only from queues that keep a higher share",
			leaf.Object, card(used), card(guaranteed), card(need))
	}
}

// oneResource is a vector of n resources with v of resource i.
func oneResource(n, i int, v int64) []int64 {
	out := make([]int64, n)
	out[i] = v
	return out
}
