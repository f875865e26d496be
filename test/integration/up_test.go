package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local/datadir"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

var (
	readyLine      = regexp.MustCompile(`aisched is ready in ([0-9.]+)s`)
	kubeconfigLine = regexp.MustCompile(`kubeconfig: (\S+)`)
	apiserverLine  = regexp.MustCompile(`apiserver: +https://(\S+)`)
	gatewayLine    = regexp.MustCompile(`gateway: +http://([^/\s]+)/`)
	consoleLine    = regexp.MustCompile(`console: +(http://\S+/)#token=([0-9a-f]+)`)
)

// upProcess is a running `aisched up`.
type upProcess struct {
	*command
	client     kubernetes.Interface
	kubeconfig string
	addr       string
	// gateway is the gateway's address.
	gateway string
	// console is the console's URL, token the admin's token printed with it.
	console, token string
}

// upArgs are startUp's arguments of `aisched up` on dataDir.
func upArgs(dataDir string, args ...string) []string {
	return append([]string{"up", "--data-dir", dataDir, "--port", "0", "--gateway-addr", "127.0.0.1:0", "--console-addr", "127.0.0.1:0"}, args...)
}

// startUp runs `aisched up args...` on dataDir with TMPDIR=tmpDir and waits until it is ready.
func startUp(t *testing.T, dataDir, tmpDir string, args ...string) *upProcess {
	t.Helper()
	c := startCommand(t, []string{"TMPDIR=" + tmpDir}, upArgs(dataDir, args...)...)
	ready := c.waitLine(t, "aisched is ready in", 2*time.Minute)
	secs, _ := strconv.ParseFloat(readyLine.FindStringSubmatch(ready)[1], 64)
	t.Logf("startup to ready: %.1fs (%s)", secs, ready)
	kubeconfig := kubeconfigLine.FindStringSubmatch(c.waitLine(t, "kubeconfig:", time.Second))[1]
	addr := apiserverLine.FindStringSubmatch(c.waitLine(t, "apiserver:", time.Second))[1]
	gateway := gatewayLine.FindStringSubmatch(c.waitLine(t, "gateway:", time.Second))[1]
	console := consoleLine.FindStringSubmatch(c.waitLine(t, "console:", time.Second))
	if console == nil {
		t.Fatal("the ready banner has no console URL with a token")
	}
	t.Logf("%s", c.waitLine(t, "memory:", time.Second))
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &upProcess{command: c, client: client, kubeconfig: kubeconfig, addr: addr, gateway: gateway, console: console[1], token: console[2]}
}

// terminate sends SIGTERM and checks that the process exits cleanly within
// 10 s and leaves no listener behind.
func (p *upProcess) terminate(t *testing.T) {
	t.Helper()
	begin := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.wait(ctx); err != nil {
		t.Fatalf("aisched up after SIGTERM: %v (want a clean exit within 10s)", err)
	}
	t.Logf("SIGTERM to exit: %.1fs", time.Since(begin).Seconds())
	for _, addr := range []string{p.addr, p.gateway} {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("something still listens on %s after aisched up exited", addr)
		}
	}
}

// TestUp runs the README's command: nodes come up Ready with GPU capacity,
// a Deployment runs, SIGTERM stops everything within 10s without leaving
// listeners or temporary files, and a restart on the same data directory
// finds the Deployment again.
func TestUp(t *testing.T) {
	t.Parallel()
	dataDir, tmpDir := t.TempDir(), t.TempDir()
	up := startUp(t, dataDir, tmpDir)
	ctx := context.Background()

	nodes, err := up.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := clusterfile.Default()
	if len(nodes.Items) != want.NodeCount() {
		t.Errorf("got %d nodes, want %d", len(nodes.Items), want.NodeCount())
	}
	gpuNodes := 0
	for _, n := range nodes.Items {
		if !nodeReady(&n) {
			t.Errorf("node %s is not Ready", n.Name)
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady {
				t.Errorf("node %s still has the not-ready taint", n.Name)
			}
		}
		if q, ok := n.Status.Capacity[gpu.ResourceName]; ok && q.Value() > 0 {
			gpuNodes++
		}
	}
	if gpuNodes == 0 {
		t.Errorf("no node shows %s capacity", gpu.ResourceName)
	}
	// The printed token signs in to the printed console as the admin.
	login, err := http.Post(up.console+"api/login", "application/json", strings.NewReader(`{"token":"`+up.token+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(login.Body)
	login.Body.Close()
	if login.StatusCode != http.StatusOK || !strings.Contains(string(body), `"user":"aisched-admin"`) {
		t.Errorf("sign-in to the console with the printed token: %d %s", login.StatusCode, body)
	}

	// A second up on the same data directory is refused while this one runs.
	out, err := runCommand(t, "up", "--data-dir", dataDir, "--port", "0")
	if err == nil || !strings.Contains(out, "in use by another aisched; stop it or choose another with --data-dir") {
		t.Errorf("second up on a busy data dir: err=%v output=%q, want a refusal", err, out)
	}

	ns := createNamespace(t, up.client)
	pod := utiltesting.MakePod("", "").SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").Obj()
	if _, err := up.client.AppsV1().Deployments(ns).Create(ctx, utiltesting.MakeDeployment("web", ns, 3, pod), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeploymentAvailable(t, up.client, ns, "web", 3)
	up.terminate(t)
	if !strings.Contains(up.Output(), "stopped in") {
		t.Errorf("aisched up did not report its stop:\n%s", up.Output())
	}
	if left, _ := os.ReadDir(tmpDir); len(left) > 0 {
		t.Errorf("aisched up left files in TMPDIR: %v", left)
	}

	up = startUp(t, dataDir, tmpDir)
	waitDeploymentAvailable(t, up.client, ns, "web", 3)
	up.terminate(t)
}

// TestUpBadInput checks that bad input gives one line naming the problem.
func TestUpBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	badCluster := filepath.Join(dir, "cluster.yaml")
	writeFile(t, badCluster, "apiVersion: aisched.io/v1alpha1\nkind: Cluster\nnodePools:\n  - name: gpu\n    count: 1\n    cpu: 8\n    memory: 32Gi\n    gpus:\n      count: 2\n      model: T4\n      memoryMiB: 0\n")
	badArgs := filepath.Join(dir, "args.yaml")
	writeFile(t, badArgs, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: x\n  plugins: {multiPoint: {enabled: [{name: PCCBalance}]}}\n  pluginConfig:\n  - name: PCCBalance\n    args: {mode: square}\n")
	badScheduler := filepath.Join(dir, "scheduler.yaml")
	writeFile(t, badScheduler, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: x\n  plugins: {score: {enabled: [{name: NoSuchPlugin}]}}\n- schedulerName: x\n")

	corruptDB := func(dataDir string) {
		db := datadir.EtcdDBPath(filepath.Join(dataDir, "etcd"))
		if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, db, strings.Repeat("not a bolt page ", 1024))
	}
	tests := []struct {
		name  string
		args  []string
		want  string
		setup func(dataDir string)
	}{
		{"busy port", []string{"--port", strconv.Itoa(busyPort)}, fmt.Sprintf("kube-apiserver address 127.0.0.1:%d is already in use (another aisched or Kubernetes?); choose another with --port", busyPort), nil},
		{"missing cluster file", []string{"--cluster", filepath.Join(dir, "nope.yaml")}, "cluster file: open " + filepath.Join(dir, "nope.yaml"), nil},
		{"bad field", []string{"--cluster", badCluster}, badCluster + ":11: nodePools[0].gpus.memoryMiB: Invalid value: 0", nil},
		{"bad scheduler config", []string{"--scheduler-config", badScheduler}, badScheduler + ":6: profiles[1].schedulerName: Duplicate value", nil},
		{"unknown feature gate", []string{"--feature-gates", "Nonsense=true"}, `invalid argument "Nonsense=true" for "--feature-gates" flag: unrecognized feature gate: Nonsense`, nil},
		{"bad plugin argument", []string{"--port", "0", "--scheduler-config", badArgs}, `pluginConfig[PCCBalance].args.mode: Unsupported value: "square"`, nil},
		{"corrupt etcd database", []string{"--port", "0"}, "or start over with --fresh (which discards every object)", corruptDB},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := filepath.Join(dir, tc.name)
			if tc.setup != nil {
				tc.setup(dataDir)
			}
			args := append([]string{"up", "--data-dir", dataDir}, tc.args...)
			out, err := runCommand(t, args...)
			if err == nil {
				t.Fatalf("aisched %v succeeded, want an error", args)
			}
			out = strings.TrimSpace(out)
			if strings.Contains(out, "\n") {
				t.Errorf("error spans several lines:\n%s", out)
			}
			if !strings.HasPrefix(out, "aisched up: ") || !strings.Contains(out, tc.want) {
				t.Errorf("output = %q, want one line starting with \"aisched up: \" containing %q", out, tc.want)
			}
		})
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitDeploymentAvailable(t *testing.T, client kubernetes.Interface, ns, name string, replicas int32) {
	t.Helper()
	localtest.Eventually(t, time.Minute, fmt.Sprintf("deployment %s/%s has %d available replicas", ns, name, replicas), func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return deploymentAvailable(d, replicas), nil
	})
}

func deploymentAvailable(d *appsv1.Deployment, replicas int32) bool {
	return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == replicas && d.Status.ReadyReplicas == replicas
}

func createNamespace(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	ns, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
