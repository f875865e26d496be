package integration

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/datadir"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/sim/metrics"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// TestSoak runs the whole local cluster (etcd, apiserver, controllers,
// scheduler, simulated nodes, platform) in this process under steady churn
// for AISCHED_SOAK (a duration; the test is skipped without it): a 1-GPU
// pod every 250 ms running 2 s, a 2-pod Job every 2 s, a 4-member gang
// every 10 s, and 20 requests a second through the gateway. Every
// AISCHED_SOAK_INTERVAL (default 1m) it records the process's RSS, Go heap
// in use, goroutines and open files, the size of etcd's database, and the
// p50 and p95 of the time from a pod's creation to its binding, and writes
// them to AISCHED_SOAK_OUT (default soak.csv in the test's directory),
// with the count of Events in the namespace; a heap profile of the process
// at the end goes beside it (.heap.pprof). AISCHED_SOAK_EVENT_TTL sets the
// apiserver's --event-ttl (default 1h). `make soak` runs it.
func TestSoak(t *testing.T) {
	duration, err := time.ParseDuration(os.Getenv("AISCHED_SOAK"))
	if err != nil {
		t.Skip("AISCHED_SOAK is not a duration: no soak (make soak)")
	}
	interval := time.Minute
	if v := os.Getenv("AISCHED_SOAK_INTERVAL"); v != "" {
		if interval, err = time.ParseDuration(v); err != nil || interval <= 0 {
			t.Fatalf("AISCHED_SOAK_INTERVAL=%q: want a positive duration", v)
		}
	}
	out := os.Getenv("AISCHED_SOAK_OUT")
	if out == "" {
		out = "soak.csv"
	}
	opts := local.Options{Platform: &local.PlatformOptions{}}
	if ttl := os.Getenv("AISCHED_SOAK_EVENT_TTL"); ttl != "" {
		if d, err := time.ParseDuration(ttl); err != nil || d <= 0 {
			t.Fatalf("AISCHED_SOAK_EVENT_TTL=%q: want a positive duration", ttl)
		}
		opts.APIServerArgs = []string{"--event-ttl=" + ttl}
	}
	e := startPlatformWith(t, opts)
	c, ns := e.c, e.ns
	e.createOperator(utiltesting.MakeOperator("demo", ns).Obj())
	e.createInstance(utiltesting.MakeInstance("demo", ns, "demo").Obj())
	e.createService(utiltesting.MakeService("demo", ns, "demo").Obj())
	e.waitService("demo", serviceReady(1), "ready")
	pods := c.Client.CoreV1().Pods(ns)

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	// Binding latency, from the creation call to the informer's sight of
	// the binding (the API's timestamps have whole seconds).
	var created sync.Map // name -> time.Time
	var latMu sync.Mutex
	var latencies []float64
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.Pod), obj.(*corev1.Pod)
			if o.Spec.NodeName != "" || n.Spec.NodeName == "" {
				return
			}
			if at, ok := created.LoadAndDelete(n.Name); ok {
				latMu.Lock()
				latencies = append(latencies, float64(time.Since(at.(time.Time)).Milliseconds()))
				latMu.Unlock()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	create := func(p *corev1.Pod) {
		created.Store(p.Name, time.Now())
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			created.Delete(p.Name)
		}
	}
	var wg sync.WaitGroup
	every(&wg, ctx.Done(), 250*time.Millisecond, func(n int) {
		p := utiltesting.MakePod(fmt.Sprintf("p-%d", n), ns).SchedulerName(scheduler.AischedProfile).
			Req(corev1.ResourceCPU, "100m").GPU(1).RestartPolicy(corev1.RestartPolicyNever).
			Annotation(nodesim.RunDurationAnnotation, "2s").Obj()
		create(p)
		// What ended a while ago goes.
		_ = pods.Delete(ctx, fmt.Sprintf("p-%d", n-40), metav1.DeleteOptions{})
	})
	every(&wg, ctx.Done(), 2*time.Second, func(n int) {
		tmpl := utiltesting.MakePod("", ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").
			RestartPolicy(corev1.RestartPolicyNever).Annotation(nodesim.RunDurationAnnotation, "1s").Obj()
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("j-%d", n), Namespace: ns},
			Spec: batchv1.JobSpec{
				Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), TTLSecondsAfterFinished: ptr.To[int32](5),
				Template: corev1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec},
			},
		}
		_, _ = c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	})
	every(&wg, ctx.Done(), 10*time.Second, func(n int) {
		for i := range 4 {
			p := utiltesting.MakePod(fmt.Sprintf("g-%d-%d", n, i), ns).SchedulerName(scheduler.AischedProfile).
				Req(corev1.ResourceCPU, "100m").GPU(1).RestartPolicy(corev1.RestartPolicyNever).
				Annotation(nodesim.RunDurationAnnotation, "3s").
				Label(podgroup.NameLabel, fmt.Sprintf("g-%d", n)).Label(podgroup.MinAvailableLabel, "4").Obj()
			create(p)
			_ = pods.Delete(ctx, fmt.Sprintf("g-%d-%d", n-3, i), metav1.DeleteOptions{})
		}
	})
	every(&wg, ctx.Done(), 50*time.Millisecond, func(int) { e.infer("demo", nil) })

	w, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rec := csv.NewWriter(w)
	header := []string{"minute", "rss_mib", "heap_inuse_mib", "goroutines", "open_files", "etcd_db_mib", "bind_p50_ms", "bind_p95_ms", "pods_bound", "events"}
	_ = rec.Write(header)
	t.Logf("%v", header)
	start := time.Now()
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		rss, _ := residentMiB()
		fds, _ := os.ReadDir("/proc/self/fd")
		var dbMiB int64
		if st, err := os.Stat(datadir.EtcdDBPath(filepath.Join(c.DataDir, "etcd"))); err == nil {
			dbMiB = st.Size() >> 20
		}
		latMu.Lock()
		pct, n := metrics.PercentilesOf(latencies), len(latencies)
		latencies = nil
		latMu.Unlock()
		var p50, p95 float64
		if pct != nil {
			p50, p95 = pct.P50, pct.P95
		}
		var events int64
		if list, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{Limit: 1}); err == nil {
			events = int64(len(list.Items))
			if list.RemainingItemCount != nil {
				events += *list.RemainingItemCount
			}
		}
		row := []string{
			strconv.FormatFloat(time.Since(start).Minutes(), 'f', 1, 64), strconv.FormatInt(rss, 10), strconv.FormatUint(ms.HeapInuse>>20, 10),
			strconv.Itoa(runtime.NumGoroutine()), strconv.Itoa(len(fds)), strconv.FormatInt(dbMiB, 10),
			strconv.FormatFloat(p50, 'f', 0, 64), strconv.FormatFloat(p95, 'f', 0, 64), strconv.Itoa(n),
			strconv.FormatInt(events, 10),
		}
		_ = rec.Write(row)
		rec.Flush()
		t.Logf("%v", row)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	sample()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			sample()
		}
	}
	wg.Wait()
	if err := rec.Error(); err != nil {
		t.Fatal(err)
	}
	heap, err := os.Create(strings.TrimSuffix(out, ".csv") + ".heap.pprof")
	if err != nil {
		t.Fatal(err)
	}
	defer heap.Close()
	if err := pprof.WriteHeapProfile(heap); err != nil {
		t.Fatal(err)
	}
	t.Logf("samples in %s, heap profile in %s", out, heap.Name())
}

// residentMiB is the resident set of this process (Linux).
func residentMiB() (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	var kb int64
	for _, line := range strings.Split(string(data), "\n") {
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			return kb >> 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS")
}
