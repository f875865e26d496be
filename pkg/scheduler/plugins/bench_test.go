// Package plugins_test benchmarks each aisched plugin's Filter and Score on
// 5000 nodes next to the upstream plugin it extends or replaces, on the
// same snapshot, so that their costs compare:
//
//	go test -run '^$' -bench . -benchmem ./pkg/scheduler/plugins/
//
// Besides wall time (ns/node) each reports the CPU time it took
// (cpu-ns/node: the benchmark thread's for scores, which run on one
// goroutine here, the process's for filters, which run in parallel), which
// a machine busy with other work inflates far less.
package plugins_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/scheduler/plugins/fgd"
	"github.com/aisched/aisched/pkg/scheduler/plugins/fgdbaseline"
	"github.com/aisched/aisched/pkg/scheduler/plugins/gpufit"
	"github.com/aisched/aisched/pkg/scheduler/plugins/heteropriority"
	"github.com/aisched/aisched/pkg/scheduler/plugins/loadaware"
	"github.com/aisched/aisched/pkg/scheduler/plugins/pccbalance"
)

const benchNodes = 5000

// fixture is 5000 GPU nodes (64 CPU, 512Gi, 8 A100 in a GPUInventory),
// each running two 1-GPU pods placed by aisched on cards 0 and 1.
type fixture struct {
	handle   fwk.Handle
	state    *gpuledger.State
	nodes    []fwk.NodeInfo
	snapshot *schedcache.Snapshot
}

func newFixture(b *testing.B) *fixture {
	b.Helper()
	state := gpuledger.NewStandalone(gpuledger.Options{})
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range benchNodes {
		name := fmt.Sprintf("n-%04d", i)
		node := st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{
			corev1.ResourceCPU: "64", corev1.ResourceMemory: "512Gi", corev1.ResourcePods: "110", gpu.ResourceName: "8",
		}).Obj()
		nodes = append(nodes, node)
		state.ObserveNode(node)
		inv := &aischedv1alpha1.GPUInventory{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}}
		for c := range 8 {
			inv.Spec.GPUs = append(inv.Spec.GPUs, aischedv1alpha1.GPU{Index: int32(c), UUID: fmt.Sprintf("GPU-%s-%d", name, c),
				Model: "NVIDIA-A100-SXM4-40GB", MemoryMiB: 40960, CUDACores: 6912, ComputeCapability: "8.0", MemoryBandwidthGBps: 1555, MaxClockMHz: 1410})
		}
		state.ObserveInventory(inv)
		for p := range 2 {
			pod := st.MakePod().Name(fmt.Sprintf("%s-p%d", name, p)).UID(fmt.Sprintf("%s-p%d", name, p)).Node(name).
				Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi", gpu.ResourceName: "1"}).Obj()
			pods = append(pods, pod)
			state.Assign(types.UID(pod.Name), name, []int{p}, gpuledger.Share{})
		}
	}
	snapshot := schedcache.NewSnapshot(pods, nodes)
	list, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	f := &fixture{state: state, nodes: list, snapshot: snapshot}
	f.handle = f.newHandle(b)
	return f
}

// newHandle returns a framework handle on the fixture's snapshot: a
// profile of its own (a profile has one card proposer).
func (f *fixture) newHandle(b *testing.B) fwk.Handle {
	h, err := frameworkruntime.NewFramework(context.Background(), nil, nil,
		frameworkruntime.WithSnapshotSharedLister(f.snapshot),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(fake.NewClientset(), 0)))
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// cpuTime is the CPU time of this thread (who: unix.RUSAGE_THREAD) or
// process (unix.RUSAGE_SELF) so far.
func cpuTime(b *testing.B, who int) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportPerNode reports the wall and CPU time per node of a benchmark
// that visited nodes nodes per round, cpu being the CPU time its loop took.
func reportPerNode(b *testing.B, nodes int, cpu time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes), "ns/node")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*nodes), "cpu-ns/node")
}

var (
	gpuPod = st.MakePod().Name("p").UID("p").
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", gpu.ResourceName: "2"}).Obj()
	cpuPod = st.MakePod().Name("c").UID("c").
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi"}).Obj()
	sharedPod = st.MakePod().Name("s").UID("s").Annotation(gpu.MilliAnnotation, "300").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi"}).Obj()
)

func newFit(b *testing.B, h fwk.Handle) fwk.Plugin {
	args := &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
		Type:      config.LeastAllocated,
		Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
	}}
	pl, err := noderesources.NewFit(context.Background(), args, h, feature.Features{})
	if err != nil {
		b.Fatal(err)
	}
	return pl
}

// BenchmarkFilter runs each filter on every node for a 2-GPU pod.
func BenchmarkFilter(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	gpuFit, err := gpufit.New(ctx, nil, f.handle, f.state)
	if err != nil {
		b.Fatal(err)
	}
	for _, pl := range []fwk.Plugin{newFit(b, f.handle), gpuFit} {
		filter := pl.(fwk.FilterPlugin)
		b.Run(pl.Name(), func(b *testing.B) {
			cs := framework.NewCycleState()
			if pf, ok := pl.(fwk.PreFilterPlugin); ok {
				if _, s := pf.PreFilter(ctx, cs, gpuPod, f.nodes); !s.IsSuccess() {
					b.Fatal(s)
				}
			}
			// As the scheduler runs filters: in parallel over the nodes
			// (the parallelizer reports to the scheduler's metrics).
			metrics.Register()
			p := parallelize.NewParallelizer(parallelize.DefaultParallelism)
			var failed atomic.Pointer[fwk.Status]
			cpu := cpuTime(b, unix.RUSAGE_SELF)
			for b.Loop() {
				p.Until(ctx, len(f.nodes), func(i int) {
					if s := filter.Filter(ctx, cs, gpuPod, f.nodes[i]); !s.IsSuccess() {
						failed.Store(s)
					}
				}, "")
			}
			cpu = cpuTime(b, unix.RUSAGE_SELF) - cpu
			if s := failed.Load(); s != nil {
				b.Fatal(s)
			}
			reportPerNode(b, len(f.nodes), cpu)
		})
	}
}

// BenchmarkScore runs PreScore once and Score on every node.
func BenchmarkScore(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	hetero, err := heteropriority.New(ctx, nil, f.handle, f.state)
	if err != nil {
		b.Fatal(err)
	}
	pcc, err := pccbalance.New(ctx, nil, f.handle, nil, f.state)
	if err != nil {
		b.Fatal(err)
	}
	// FGD with 35 typical shapes, as many as the Alibaba trace's default
	// pod list keeps at 95% coverage.
	var typical []string
	for i := range 35 {
		switch i % 3 {
		case 0:
			typical = append(typical, fmt.Sprintf(`{"milliCPU":%d,"gpuMilli":%d,"weight":%d}`, 1000*(i+1), 100+25*i, 35-i))
		case 1:
			typical = append(typical, fmt.Sprintf(`{"milliCPU":%d,"gpuMilli":1000,"gpuCount":%d,"weight":%d}`, 1000*(i+1), 1+i%8, 35-i))
		default:
			typical = append(typical, fmt.Sprintf(`{"milliCPU":%d,"weight":%d}`, 1000*(i+1), 35-i))
		}
	}
	newFGDOn := func(h fwk.Handle) fwk.Plugin {
		pl, err := fgd.New(ctx, &runtime.Unknown{Raw: []byte(`{"typicalPods":[` + strings.Join(typical, ",") + `]}`)}, h, f.state)
		if err != nil {
			b.Fatal(err)
		}
		return pl
	}
	// A fresh plugin each round, in a profile of its own.
	newFGD := func() fwk.Plugin { return newFGDOn(f.newHandle(b)) }
	fgdPlugin := newFGDOn(f.handle)
	bestFit, err := fgdbaseline.NewBestFit(ctx, nil, f.handle, f.state)
	if err != nil {
		b.Fatal(err)
	}
	// LoadAware without NodeMetrics: every node scored from its pods'
	// requests, as on a cluster without aisched's agent.
	loadAware, err := loadaware.New(ctx, nil, f.handle, nil, clock.RealClock{}, nil, f.state)
	if err != nil {
		b.Fatal(err)
	}
	balanced, err := noderesources.NewBalancedAllocation(ctx, &config.NodeResourcesBalancedAllocationArgs{
		Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
	}, f.handle, feature.Features{})
	if err != nil {
		b.Fatal(err)
	}
	// FGD remembers each node's fragmentation and last score while the node
	// and the typical shapes stay as they are: "cold" is a new plugin each
	// round (everything computed), the plain case the same pod again on
	// unchanged nodes (a run of alike pods), "alternating" two shapes
	// (the fragmentation remembered, the score computed).
	for _, tc := range []struct {
		name string
		pl   fwk.Plugin
		pods []*corev1.Pod // scored in turn, one per round
		// fresh, when set, makes the plugin of each round.
		fresh func() fwk.Plugin
	}{
		{name: "NodeResourcesFit", pl: newFit(b, f.handle), pods: []*corev1.Pod{gpuPod}},
		{name: "NodeResourcesBalancedAllocation", pl: balanced, pods: []*corev1.Pod{gpuPod}},
		{name: "HeteroPriority/gpu-pod", pl: hetero, pods: []*corev1.Pod{gpuPod}},
		{name: "HeteroPriority/cpu-pod", pl: hetero, pods: []*corev1.Pod{cpuPod}},
		{name: "PCCBalance", pl: pcc, pods: []*corev1.Pod{gpuPod}},
		{name: "FGD/gpu-pod/cold", pods: []*corev1.Pod{gpuPod}, fresh: newFGD},
		{name: "FGD/gpu-pod", pl: fgdPlugin, pods: []*corev1.Pod{gpuPod}},
		{name: "FGD/shared-pod/cold", pods: []*corev1.Pod{sharedPod}, fresh: newFGD},
		{name: "FGD/shared-pod", pl: fgdPlugin, pods: []*corev1.Pod{sharedPod}},
		{name: "FGD/alternating", pl: fgdPlugin, pods: []*corev1.Pod{gpuPod, sharedPod}},
		{name: "BestFit", pl: bestFit, pods: []*corev1.Pod{gpuPod}},
		{name: "BestFit/cpu-pod", pl: bestFit, pods: []*corev1.Pod{cpuPod}},
		{name: "LoadAware/cpu-pod", pl: loadAware, pods: []*corev1.Pod{cpuPod}},
		{name: "PCCBalance/cpu-pod", pl: pcc, pods: []*corev1.Pod{cpuPod}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			// Scores run on this goroutine: its thread's CPU time is theirs.
			goruntime.LockOSThread()
			defer goruntime.UnlockOSThread()
			round := 0
			var cpu time.Duration
			for b.Loop() {
				pl, pod := tc.pl, tc.pods[round%len(tc.pods)]
				round++
				if tc.fresh != nil {
					b.StopTimer()
					pl = tc.fresh()
					b.StartTimer()
				}
				start := cpuTime(b, unix.RUSAGE_THREAD)
				cs := framework.NewCycleState()
				if ps, ok := pl.(fwk.PreScorePlugin); ok {
					if s := ps.PreScore(ctx, cs, pod, f.nodes); !s.IsSuccess() && !s.IsSkip() {
						b.Fatal(s)
					}
				}
				score := pl.(fwk.ScorePlugin)
				for _, ni := range f.nodes {
					if _, s := score.Score(ctx, cs, pod, ni); !s.IsSuccess() {
						b.Fatal(s)
					}
				}
				cpu += cpuTime(b, unix.RUSAGE_THREAD) - start
			}
			reportPerNode(b, len(f.nodes), cpu)
		})
	}
}
