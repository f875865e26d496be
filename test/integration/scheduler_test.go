package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// TestExternalScheduler runs `aisched scheduler --kubeconfig --config` as
// its own process, as the Helm chart ships it: the chart's manifests
// apply, and with the chart's configuration and only the permissions of
// its ServiceAccount, against a cluster whose in-process scheduler serves
// only default-scheduler, it takes its leader lease, serves /healthz and
// binds the pods that name its profile.
func TestExternalScheduler(t *testing.T) {
	t.Parallel()
	c := startWithoutAisched(t, "")
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	// A gang of two, so that the job queue has a group to report.
	for _, name := range []string{"p", "q"} {
		pod := utiltesting.MakePod(name, ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "1").
			Label(podgroup.NameLabel, "pq").Label(podgroup.MinAvailableLabel, "2").Obj()
		pod.UID = ""
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody serves the profile yet: the pod stays unbound.
	time.Sleep(2 * time.Second)
	if p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("pod bound to %q (err %v) before the external scheduler started", p.Spec.NodeName, err)
	}

	manifests := renderChart(t, onlyComponents("scheduler")...)
	installChart(t, c, manifests)
	waitDeploymentAvailable(t, c.Client, "aisched-system", "aisched-scheduler", 2)
	config := configMapFiles(t, manifests, "aisched-scheduler-config")
	kubeconfig := serviceAccountKubeconfig(t, c, "aisched-system", "aisched-scheduler")

	port := freePort(t)
	sched := startCommand(t, nil, "scheduler",
		"--kubeconfig", kubeconfig,
		"--config", filepath.Join(config, "scheduler-config.yaml"),
		"--shared-config", filepath.Join(config, "shared-config.yaml"),
		"--secure-port", strconv.Itoa(port),
		// The test has no token the scheduler could review.
		"--authorization-always-allow-paths", "/healthz,/metrics")
	localtest.Eventually(t, time.Minute, "pod bound by the external scheduler", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning, err
	})
	lease, err := c.Client.CoordinationV1().Leases("aisched-system").Get(ctx, "aisched-scheduler", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("leader lease aisched-system/aisched-scheduler: %v; want one held", err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz of the external scheduler: %v %v, want 200", err, resp)
	} else {
		resp.Body.Close()
	}

	// The shared state's metrics: the GPU ledger's cards (the
	// default cluster's GPU nodes) and the job queue's.
	resp, err = client.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`aisched_gpu_cards{model="`, "aisched_gang_partial_groups 0", "aisched_jobqueue_reservation_held 0",
		fmt.Sprintf(`aisched_jobqueue_groups{namespace=%q,reason="Admitted"} 1`, ns), "aisched_jobqueue_admission_wait_seconds_count 1",
		"aisched_jobqueue_pass_duration_seconds_count"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics of the external scheduler lacks %q", want)
		}
	}
	// Every metric of the scheduler's shared state that the chart's alerts
	// and dashboard use is one the scheduler serves.
	monitoring := string(renderChart(t, "--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.dashboard.enabled=true",
		"--show-only", "templates/monitoring/prometheusrule.yaml", "--show-only", "templates/monitoring/dashboard.yaml"))
	used := regexp.MustCompile(`aisched_(jobqueue|gang|gpu)_[a-z_]+`).FindAllString(monitoring, -1)
	if len(used) < 5 {
		t.Errorf("the chart's monitoring uses %d of the scheduler's metrics, want its alerts and panels", len(used))
	}
	for _, name := range used {
		if !strings.Contains(string(body), "# TYPE "+strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")+" ") {
			t.Errorf("the chart's monitoring uses %s, which the scheduler does not serve", name)
		}
	}

	if err := sched.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := sched.wait(stopCtx); err != nil {
		t.Errorf("external scheduler after SIGTERM: %v, want a clean exit", err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestSchedulerFlags covers the command line of `aisched scheduler` that
// fails before it talks to a cluster, and `aisched version`.
func TestSchedulerFlags(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection: {kubeconfig: /etc/a.kubeconfig}\nprofiles: [{schedulerName: aisched}]\n")
	out, err := runCommand(t, "scheduler", "--config", cfg, "--kubeconfig", "/etc/b.kubeconfig")
	if err == nil || !strings.Contains(out, "--kubeconfig /etc/b.kubeconfig conflicts with clientConnection.kubeconfig /etc/a.kubeconfig") {
		t.Errorf("conflicting kubeconfigs: err=%v output=%q, want a refusal naming both", err, out)
	}
	out, err = runCommand(t, "version")
	if err != nil || !strings.Contains(out, "kubernetes v1.37.0") {
		t.Errorf("aisched version: err=%v output=%q, want the embedded Kubernetes version", err, out)
	}
}
