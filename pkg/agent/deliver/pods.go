package deliver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// DefaultPodWait is how long ListerPods waits for a pod to reach the
// agent's informer: the kubelet and the agent watch the same pods, so the
// agent lags by a watch event, rarely by more than a second.
const DefaultPodWait = 10 * time.Second

// ListerPods is the PodSource of an informer of the node's pods.
type ListerPods struct {
	Lister corelisters.PodLister
	// Wait bounds the wait for a pod not yet in the informer; default
	// DefaultPodWait.
	Wait time.Duration
}

// Pod returns the pod with that UID, waiting up to Wait for it to appear
// (or for an older pod of the same name to be replaced).
func (l ListerPods) Pod(ctx context.Context, namespace, name, uid string) (*corev1.Pod, error) {
	timeout := l.Wait
	if timeout <= 0 {
		timeout = DefaultPodWait
	}
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		p, err := l.Lister.Pods(namespace).Get(name)
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, err
		case string(p.UID) != uid:
			return false, nil
		}
		pod = p
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the pod with UID %s is not in the agent's view of the node's pods after %s: %w", uid, timeout, err)
	}
	return pod, nil
}
