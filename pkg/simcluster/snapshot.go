package simcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/queuetree"
)

// StartSnapshot starts a fast-engine cluster holding a copy of a live
// cluster's objects (core objects, and aisched's GPUInventories,
// NodeMetrics and PodGroups), with no simulated kubelets: its nodes are
// the snapshot's, its pods stay as they are unless deleted. Its clock
// starts at now. The scheduler runs with opts' configuration; the node
// pools of opts are not used.
func StartSnapshot(ctx context.Context, now time.Time, objects, aischedObjects []runtime.Object, opts Options) (SnapshotCluster, error) {
	if opts.SharedConfig == nil {
		opts.SharedConfig = aischedconfig.DefaultShared()
	}
	opts.NodePools = nil
	c, err := startFastAt(ctx, now, opts, func(api *fakeAPI) error {
		for _, o := range objects {
			if err := api.core.Tracker().Add(o); err != nil {
				return fmt.Errorf("snapshot: %w", err)
			}
		}
		for _, o := range aischedObjects {
			if err := api.addAisched(o); err != nil {
				return fmt.Errorf("snapshot: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// SnapshotCluster is a fast-engine cluster started from a snapshot, which
// also tells what its job queue decided.
type SnapshotCluster interface {
	Cluster
	// QueueDecision is the job queue's last decision for the pod group
	// with key (namespace/name); ok is false when it has none.
	QueueDecision(key string) (jobqueue.Decision, bool)
	// QueuePlaced is the topology domain the job queue placed the pod
	// group with key in; nil for none.
	QueuePlaced(key string) *jobqueue.Placed
	// QueueOf is the team queue of a pod's work (jobqueue.Queue.QueueOf),
	// and Queues the team queues as the job queue's last pass counted
	// them (nil without queues).
	QueueOf(pod *corev1.Pod) (name, problem string)
	Queues() *queuetree.Tree
}

// QueueDecision implements SnapshotCluster.
func (f *fastCluster) QueueDecision(key string) (jobqueue.Decision, bool) {
	return f.shared.Queue.Decision(key)
}

// QueuePlaced implements SnapshotCluster.
func (f *fastCluster) QueuePlaced(key string) *jobqueue.Placed {
	return f.shared.Queue.Placed(key)
}

// QueueOf implements SnapshotCluster.
func (f *fastCluster) QueueOf(pod *corev1.Pod) (string, string) { return f.shared.Queue.QueueOf(pod) }

// Queues implements SnapshotCluster.
func (f *fastCluster) Queues() *queuetree.Tree { return f.shared.Queue.Queues() }
