// Package apiserver is the simulator's engine on `aisched up`'s cluster:
// a real etcd, kube-apiserver and controllers in a temporary directory, in
// real time. It models what the fast engine cannot (ResourceQuota
// admission, controllers) at the speed of a real control plane. It is a
// package of its own so that the runners that need only the fast engine
// (the console, whatif) do not link the control plane.
package apiserver

import (
	"context"
	"errors"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/simcluster"
)

// Engine starts clusters on the embedded control plane, one run at a time
// unless told: each starts an etcd and a kube-apiserver.
var Engine = simcluster.Engine{Name: "apiserver", Parallel: 1, Start: start}

// apiserverCluster is `aisched up`'s embedded cluster in a temporary
// directory.
type apiserverCluster struct {
	c       *local.Cluster
	aisched versioned.Interface
	dir     string
}

func start(ctx context.Context, opts simcluster.Options) (simcluster.Cluster, error) {
	dir, err := os.MkdirTemp("", "aisched-sim-")
	if err != nil {
		return nil, err
	}
	c, err := local.Start(ctx, local.Options{
		DataDir:                dir,
		Cluster:                &clusterfile.Cluster{APIVersion: clusterfile.APIVersion, Kind: clusterfile.Kind, NodePools: opts.NodePools},
		SchedulerConfig:        opts.SchedulerConfig,
		SharedConfig:           opts.SharedConfig,
		DiscardSchedulerEvents: opts.DiscardSchedulerEvents,
		Nodes:                  nodesim.Options{NodesOnly: opts.NodesOnly, MetricsInterval: opts.MetricsInterval, Slowdown: opts.Slowdown},
	})
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	aisched, err := versioned.NewForConfig(c.Config)
	if err != nil {
		return nil, errors.Join(err, c.Stop(), os.RemoveAll(dir))
	}
	return &apiserverCluster{c: c, aisched: aisched, dir: dir}, nil
}

func (a *apiserverCluster) Client() kubernetes.Interface      { return a.c.Client }
func (a *apiserverCluster) Aisched() versioned.Interface      { return a.aisched }
func (a *apiserverCluster) Now() time.Time                    { return time.Now() }
func (a *apiserverCluster) KubeletHolders() map[string]string { return a.c.KubeletHolders() }
func (a *apiserverCluster) SchedulerPlugins(profile string) (*config.Plugins, bool) {
	return a.c.SchedulerPlugins(profile)
}
func (a *apiserverCluster) Stop() error { return errors.Join(a.c.Stop(), os.RemoveAll(a.dir)) }

// RunUntil waits for the real time t.
func (a *apiserverCluster) RunUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitAdmissible waits until each namespace has its default service
// account and, with a quota, the quota's status.
func (a *apiserverCluster) WaitAdmissible(ctx context.Context, namespaces []string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, ns := range namespaces {
			if _, err := a.c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
				return false, nil
			}
			quotas, err := a.c.Client.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, q := range quotas.Items {
				if len(q.Status.Hard) == 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
}
