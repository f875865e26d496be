package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// TestUpKilled kills `aisched up` itself (SIGKILL, the whole cluster at
// once) three times, at three moments: while a gang's members are being
// bound, at a random moment of steady churn (ConfigMaps, GPU pods, gangs),
// and during a restart, before the cluster is ready. On the cluster started
// last it counts the objects whose creation was acknowledged and that are
// gone, the cards held by two pods (gpuledger.Audit over the running pods
// and the nodes' inventories), and the gangs left with members bound and
// members pending once the cluster has settled. It logs the counts on one
// line ("faults:"), and each must be 0.
func TestUpKilled(t *testing.T) {
	t.Parallel()
	dataDir, tmpDir := t.TempDir(), t.TempDir()
	seed := time.Now().UnixNano()
	rnd := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	ctx := context.Background()

	var (
		mu sync.Mutex
		// acked maps "kind/namespace/name" to the UID the apiserver gave.
		acked = map[string]string{}
		kills []string
	)
	ack := func(key, uid string) {
		mu.Lock()
		acked[key] = uid
		mu.Unlock()
	}
	kill := func(up *command, moment string) {
		t.Helper()
		if err := up.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-up.done
		kills = append(kills, moment)
	}

	up := startUp(t, dataDir, tmpDir)
	ns := "faults"
	nsObj, err := up.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ack("Namespace//"+ns, string(nsObj.UID))

	// churn creates objects until stop closes: a ConfigMap every 50 ms, a
	// 1-GPU pod running 2 s every 250 ms, a 4-member gang running 3 s every
	// 2 s. Each object whose creation returns is acknowledged.
	churn := func(client kubernetes.Interface, round int, stop <-chan struct{}) *sync.WaitGroup {
		var wg sync.WaitGroup
		createPod := func(p *corev1.Pod) {
			if got, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err == nil {
				ack("Pod/"+ns+"/"+p.Name, string(got.UID))
			}
		}
		every(&wg, stop, 50*time.Millisecond, func(n int) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-%d", round, n)}, Data: map[string]string{"n": fmt.Sprint(n)}}
			if got, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err == nil {
				ack("ConfigMap/"+ns+"/"+cm.Name, string(got.UID))
			}
		})
		every(&wg, stop, 250*time.Millisecond, func(n int) {
			createPod(utiltesting.MakePod(fmt.Sprintf("p-%d-%d", round, n), ns).SchedulerName(scheduler.AischedProfile).
				Req(corev1.ResourceCPU, "100m").GPU(1).RestartPolicy(corev1.RestartPolicyNever).
				Annotation(nodesim.RunDurationAnnotation, "2s").Obj())
		})
		every(&wg, stop, 2*time.Second, func(n int) {
			for i := range 4 {
				createPod(utiltesting.MakePod(fmt.Sprintf("g-%d-%d-%d", round, n, i), ns).SchedulerName(scheduler.AischedProfile).
					Req(corev1.ResourceCPU, "100m").GPU(1).RestartPolicy(corev1.RestartPolicyNever).
					Annotation(nodesim.RunDurationAnnotation, "3s").
					Label(podgroup.NameLabel, fmt.Sprintf("g-%d-%d", round, n)).Label(podgroup.MinAvailableLabel, "4").Obj())
			}
		})
		return &wg
	}

	// 1. While a gang's members are being bound: 48 members without GPUs
	// (the churn takes the cards) that run on, created after some churn;
	// the kill comes at the first binding the watch sees.
	stop := make(chan struct{})
	wg := churn(up.client, 0, stop)
	time.Sleep(time.Duration(1000+rnd.IntN(2000)) * time.Millisecond)
	const size = 48
	w, err := up.client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: podgroup.NameLabel + "=mid"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range size {
		p := utiltesting.MakePod(fmt.Sprintf("mid-%d", i), ns).SchedulerName(scheduler.AischedProfile).
			Req(corev1.ResourceCPU, "10m").Label(podgroup.NameLabel, "mid").Label(podgroup.MinAvailableLabel, fmt.Sprint(size)).Obj()
		got, err := up.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ack("Pod/"+ns+"/"+p.Name, string(got.UID))
	}
	boundSeen := map[string]bool{}
	timeout := time.After(time.Minute)
	for len(boundSeen) == 0 {
		select {
		case ev := <-w.ResultChan():
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				boundSeen[p.Name] = true
			}
		case <-timeout:
			t.Fatal("no member of gang mid bound within a minute")
		}
	}
	kill(up.command, fmt.Sprintf("gang mid at its first binding seen (%d of %d)", len(boundSeen), size))
	w.Stop()
	close(stop)
	wg.Wait()

	// 2. At a random moment of churn.
	up = startUp(t, dataDir, tmpDir)
	stop = make(chan struct{})
	wg = churn(up.client, 1, stop)
	after := time.Duration(2000+rnd.IntN(4000)) * time.Millisecond
	time.Sleep(after)
	close(stop)
	kill(up.command, fmt.Sprintf("churn after %s", after))
	wg.Wait()

	// 3. During a restart, before the cluster is ready.
	restarting := startCommand(t, []string{"TMPDIR=" + tmpDir}, upArgs(dataDir)...)
	after = time.Duration(300+rnd.IntN(1500)) * time.Millisecond
	time.Sleep(after)
	kill(restarting, fmt.Sprintf("restart after %s", after))

	up = startUp(t, dataDir, tmpDir)
	lost := 0
	mu.Lock()
	for key, uid := range acked {
		kind, name, _ := strings.Cut(key, "/")
		_, name, _ = strings.Cut(name, "/")
		var (
			got metav1.Object
			err error
		)
		switch kind {
		case "Namespace":
			got, err = up.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		case "ConfigMap":
			got, err = up.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		default:
			got, err = up.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		}
		switch {
		case apierrors.IsNotFound(err):
			lost++
			t.Errorf("acknowledged %s is gone", key)
		case err != nil:
			t.Fatal(err)
		case string(got.GetUID()) != uid:
			lost++
			t.Errorf("acknowledged %s came back as another object (uid %s, was %s)", key, got.GetUID(), uid)
		}
	}
	total := len(acked)
	mu.Unlock()

	// Settled: no group has members bound and members pending.
	var partial []string
	localtest.Eventually(t, 3*time.Minute, "no gang partly placed", func(ctx context.Context) (bool, error) {
		pods, err := up.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podgroup.NameLabel})
		if err != nil {
			return false, err
		}
		boundOf, pendingOf := map[string]int{}, map[string]int{}
		for _, p := range pods.Items {
			g := p.Labels[podgroup.NameLabel]
			if p.Spec.NodeName != "" {
				boundOf[g]++
			} else {
				pendingOf[g]++
			}
		}
		partial = partial[:0]
		for g, n := range pendingOf {
			if boundOf[g] > 0 && n > 0 {
				partial = append(partial, fmt.Sprintf("%s (%d bound, %d pending)", g, boundOf[g], n))
			}
		}
		return len(partial) == 0, nil
	})
	doubles := cardsGivenTwice(t, up)
	t.Logf("faults: %d kill -9 of aisched up (%v): %d of %d acknowledged objects lost, %d cards given twice, %d partial gangs %v",
		len(kills), kills, lost, total, len(doubles), len(partial), partial)
	for _, d := range doubles {
		t.Errorf("card given twice: %s", d)
	}
	up.terminate(t)
}

// cardsGivenTwice audits the cards held by the running pods of the local
// cluster against its nodes' GPUInventories (gpuledger.Audit): each problem
// is a card held by two pods or shared beyond itself.
func cardsGivenTwice(t *testing.T, up *upProcess) []string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", up.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	invs, err := versioned.NewForConfigOrDie(cfg).AischedV1alpha1().GPUInventories().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string]*gpu.Set{}
	for i := range invs.Items {
		sets[invs.Items[i].Name] = gpu.NewSet(gpu.FromInventory(&invs.Items[i]))
	}
	pods, err := up.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var running []*corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodRunning {
			running = append(running, &pods.Items[i])
		}
	}
	return gpuledger.Audit(func(node string) *gpu.Set { return sets[node] }, running)
}
