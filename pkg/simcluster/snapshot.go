package simcluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/jobqueue"
)

// StartSnapshot starts a fast-engine cluster holding a copy of a live
// cluster's objects (core objects, and aisched's GPUInventories,
// NodeMetrics and PodGroups), with no simulated kubelets: its nodes are
// the snapshot's, its pods stay as they are unless deleted. Its clock
// starts at now. The scheduler runs with opts' configuration; the node
// pools of opts are not used.
func StartSnapshot(ctx context.Context, now time.Time, objects, aischedObjects []runtime.Object, opts Options) (SnapshotCluster, error) {
	if opts.Services == nil {
		opts.Services = aischedconfig.DefaultServices()
	}
	opts.NodePools = nil
	c, err := startFastAt(ctx, now, opts, func(api *fakeAPI) error {
		for _, o := range objects {
			if err := api.core.Tracker().Add(o); err != nil {
				return fmt.Errorf("snapshot: %w", err)
			}
		}
		for _, o := range aischedObjects {
			if err := api.aisched.Tracker().Add(o); err != nil {
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
}

// QueueDecision implements SnapshotCluster.
func (f *fastCluster) QueueDecision(key string) (jobqueue.Decision, bool) {
	return f.svc.Queue.Decision(key)
}
