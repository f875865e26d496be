package sim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobcontroller "k8s.io/kubernetes/pkg/controller/job"

	"github.com/aisched/aisched/pkg/simcluster"
)

// submitter creates the workload's pods and, as the Job controller does,
// creates again those the apiserver refused for a ResourceQuota, and
// replaces those the scheduler evicted. The refused pods of one job (a
// pod group, or a pod in no group) are tried again after the Job
// controller's API backoff, 1s doubling to 1m (DefaultJobApiBackOff,
// MaxJobApiBackOff), until they are created or the run ends; a pod
// refused for another reason never runs. An evicted pod (preempted, or
// taken back for a team queue) is replaced at once by a new pod of the
// same job, named <pod>-r<n>, which runs its whole duration again. It is
// safe for concurrent use: replacements are made from the pod watcher.
type submitter struct {
	c simcluster.Cluster
	// arrive tells the watcher of each pod submitted, replacements
	// included.
	arrive func(*corev1.Pod)

	mu sync.Mutex
	// retries are the jobs with refused pods, in the order they were
	// refused.
	retries []*retry
	// rejected counts the pods refused for good.
	rejected int
	// first names, for each pod submitted, the pod of the workload it
	// is or replaces, and templates holds those pods as first built;
	// replaced counts their replacements.
	first     map[string]string
	templates map[string]*corev1.Pod
	replaced  map[string]int
}

// retry is a job's pods waiting to be created again.
type retry struct {
	job     string
	pods    []*corev1.Pod
	at      time.Time
	backoff time.Duration
}

func newSubmitter(c simcluster.Cluster, arrive func(*corev1.Pod)) *submitter {
	return &submitter{c: c, arrive: arrive, first: map[string]string{}, templates: map[string]*corev1.Pod{}, replaced: map[string]int{}}
}

// submit submits a pod of the workload: the watcher is told, and it is
// created; a pod refused for a quota is tried again later.
func (s *submitter) submit(ctx context.Context, pod *corev1.Pod) error {
	key := pod.Namespace + "/" + pod.Name
	s.mu.Lock()
	if _, ok := s.first[key]; !ok {
		s.first[key] = key
		s.templates[key] = pod.DeepCopy()
	}
	s.mu.Unlock()
	return s.create(ctx, pod)
}

// create tells the watcher of pod and creates it.
func (s *submitter) create(ctx context.Context, pod *corev1.Pod) error {
	s.arrive(pod)
	refused, err := s.try(ctx, pod)
	if err != nil || !refused {
		return err
	}
	job, _ := jobOf(pod)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.retries {
		if r.job == job {
			r.pods = append(r.pods, pod)
			return nil
		}
	}
	s.retries = append(s.retries, &retry{job: job, pods: []*corev1.Pod{pod},
		at: s.c.Now().Add(jobcontroller.DefaultJobApiBackOff), backoff: jobcontroller.DefaultJobApiBackOff})
	return nil
}

// replace submits a new pod for an evicted pod of the workload, as the
// controller of its job would: the pod first built, under a new name.
func (s *submitter) replace(ctx context.Context, evicted *corev1.Pod) error {
	s.mu.Lock()
	first, ok := s.first[evicted.Namespace+"/"+evicted.Name]
	if !ok {
		s.mu.Unlock()
		return nil
	}
	s.replaced[first]++
	pod := s.templates[first].DeepCopy()
	pod.Name = fmt.Sprintf("%s-r%d", pod.Name, s.replaced[first])
	s.first[pod.Namespace+"/"+pod.Name] = first
	s.mu.Unlock()
	return s.create(ctx, pod)
}

// try creates pod once and reports whether a quota refused it; a pod
// refused for another reason counts as rejected.
func (s *submitter) try(ctx context.Context, pod *corev1.Pod) (quotaRefused bool, err error) {
	_, err = s.c.Client().CoreV1().Pods(pod.Namespace).Create(ctx, pod.DeepCopy(), metav1.CreateOptions{})
	switch {
	case err == nil:
		return false, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
		return true, nil
	}
	s.mu.Lock()
	s.rejected++
	s.mu.Unlock()
	return false, nil
}

// next is when the next retry is due; ok is false when none waits.
func (s *submitter) next() (at time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.retries {
		if !ok || r.at.Before(at) {
			at, ok = r.at, true
		}
	}
	return at, ok
}

// retryDue creates again the pods of the jobs whose retry is due.
func (s *submitter) retryDue(ctx context.Context) error {
	now := s.c.Now()
	s.mu.Lock()
	var due []*retry
	kept := s.retries[:0]
	for _, r := range s.retries {
		if r.at.After(now) {
			kept = append(kept, r)
		} else {
			due = append(due, r)
		}
	}
	s.retries = kept
	s.mu.Unlock()
	for _, r := range due {
		var still []*corev1.Pod
		for _, p := range r.pods {
			refused, err := s.try(ctx, p)
			if err != nil {
				return err
			}
			if refused {
				still = append(still, p)
			}
		}
		if len(still) > 0 {
			r.pods = still
			r.backoff = min(2*r.backoff, jobcontroller.MaxJobApiBackOff)
			r.at = now.Add(r.backoff)
			s.mu.Lock()
			s.retries = append(s.retries, r)
			s.mu.Unlock()
		}
	}
	return nil
}

// runUntil lets the cluster work until t, creating again the refused pods
// whose retries are due before.
func (s *submitter) runUntil(ctx context.Context, t time.Time) error {
	for {
		at, ok := s.next()
		if !ok || at.After(t) {
			return s.c.RunUntil(ctx, t)
		}
		if err := s.c.RunUntil(ctx, at); err != nil {
			return err
		}
		if err := s.retryDue(ctx); err != nil {
			return err
		}
	}
}

// left counts the pods never created: refused for good, or still refused
// by a quota at the end.
func (s *submitter) left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.rejected
	for _, r := range s.retries {
		n += len(r.pods)
	}
	return n
}
