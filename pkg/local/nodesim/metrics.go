package nodesim

import (
	"context"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/agent"
	"github.com/aisched/aisched/pkg/podload"
)

// nodeIndex indexes the pod informer by node name.
const nodeIndex = "node"

func podNode(obj interface{}) ([]string, error) {
	if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
		return []string{pod.Spec.NodeName}, nil
	}
	return nil, nil
}

// publishMetrics publishes every node's NodeMetrics each MetricsInterval,
// with the agent's writer, with a load made of the pool's base load and
// the expected load (podload.Of) of the pods the node runs.
func (s *Simulator) publishMetrics(ctx context.Context) {
	logger := klog.FromContext(ctx)
	s.metricsWriters = map[string]*agent.MetricsWriter{}
	ticker := s.clock.NewTicker(s.opts.MetricsInterval)
	defer ticker.Stop()
	for {
		for _, name := range s.nodeNames() {
			if err := s.publishNodeMetrics(ctx, name); err != nil && ctx.Err() == nil {
				logger.V(2).Info("Publishing node metrics failed", "node", name, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// nodeMetrics is the sample of a node that runs pods.
func nodeMetrics(n Node, pods []*corev1.Pod, now time.Time) aischedv1alpha1.NodeMetricsStatus {
	pool := n.Pool
	perf := pool.Performance.WithDefaults()
	var used podload.Load
	for _, pod := range pods {
		if pod.Status.Phase != corev1.PodRunning {
			continue
		}
		used = used.Add(podload.Estimate(pod))
	}
	cpu, memory := pool.CPU.MilliValue(), pool.Memory.Value()
	percent := func(base int32, part, whole float64) *int32 {
		if whole <= 0 {
			return ptr.To(base)
		}
		return ptr.To(int32(min(100, max(0, float64(base)+math.Round(100*part/whole)))))
	}
	return aischedv1alpha1.NodeMetricsStatus{
		SampleTime: metav1.NewTime(now),
		// An instant, not an average: the pods running now. A window of 0
		// makes LoadAware add only pods bound after it.
		Window: metav1.Duration{},
		Source: aischedv1alpha1.MetricsSourceSimulated,
		Utilization: aischedv1alpha1.Utilization{
			CPU:     percent(pool.BaseLoad.CPU, float64(used.MilliCPU), float64(cpu)),
			Memory:  percent(pool.BaseLoad.Memory, float64(used.Memory), float64(memory)),
			Network: percent(pool.BaseLoad.Network, float64(used.NetworkBytesPerSecond)*8, float64(perf.NetworkMbps)*1e6),
			Disk:    percent(pool.BaseLoad.Disk, float64(used.DiskPercent), 100),
		},
		Performance: aischedv1alpha1.Performance{
			Cores:           int32(math.Ceil(float64(cpu) / 1000)),
			MaxFrequencyMHz: perf.CPUMaxFrequencyMHz,
			Memory:          ptr.To(pool.Memory.DeepCopy()),
			NetworkMbps:     perf.NetworkMbps,
			DiskMBps:        perf.DiskMBps,
		},
	}
}

func (s *Simulator) publishNodeMetrics(ctx context.Context, name string) error {
	s.nodesMu.RLock()
	n, ok := s.nodes[name]
	s.nodesMu.RUnlock()
	if !ok {
		return nil
	}
	objs, err := s.pods.GetIndexer().ByIndex(nodeIndex, name)
	if err != nil {
		return err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		pods = append(pods, o.(*corev1.Pod))
	}
	status := nodeMetrics(n, pods, s.clock.Now())

	w, ok := s.metricsWriters[name]
	if !ok {
		w = agent.NewMetricsWriter(s.aisched, name, agent.OwnedByNode(s.client, name))
		s.metricsWriters[name] = w
	}
	return w.Write(ctx, status)
}
