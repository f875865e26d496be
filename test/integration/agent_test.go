package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
)

// runAgentOnce runs `aisched agent --once` for node against the cluster of
// kubeconfig, with a short window and a configured disk speed, and returns
// its output.
func runAgentOnce(t *testing.T, kubeconfig, node string) (string, error) {
	t.Helper()
	return runCommand(t, "agent", "--kubeconfig", kubeconfig, "--node-name", node, "--once",
		"--window", "200ms", "--disk-mbps", "100", "--metrics-bind-address", "0")
}

// TestAgentOnce publishes this machine's load with `aisched agent --once`
// as the NodeMetrics of a node that no simulated node publishes for: one
// without a Node object, which has no owner, and one with a Node (created
// here, not simulated), which owns it and takes it along when deleted.
func TestAgentOnce(t *testing.T) {
	t.Parallel()
	c := localtest.Start(t, local.Options{})
	client := versioned.NewForConfigOrDie(c.Config)
	ctx := context.Background()
	node, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-node"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		node       string
		wantOwners []metav1.OwnerReference
	}{
		{name: "no Node", node: "agent-ghost"},
		{name: "Node", node: node.Name, wantOwners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			begin := time.Now()
			out, err := runAgentOnce(t, c.KubeconfigPath, tc.node)
			if err != nil {
				t.Fatalf("aisched agent --once: %v\n%s", err, out)
			}
			t.Logf("aisched agent --once took %.1fs", time.Since(begin).Seconds())
			nm, err := client.AischedV1alpha1().NodeMetrics().Get(ctx, tc.node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkAgentSample(t, nm)
			if len(nm.OwnerReferences) != len(tc.wantOwners) || (len(tc.wantOwners) > 0 && nm.OwnerReferences[0] != tc.wantOwners[0]) {
				t.Errorf("owner references %+v, want %+v", nm.OwnerReferences, tc.wantOwners)
			}

			// A second run updates the same object. Samples are stamped in
			// whole seconds: a second run within the same second could
			// write the same status, which changes nothing.
			time.Sleep(time.Until(nm.Status.SampleTime.Add(time.Second)))
			if out, err := runAgentOnce(t, c.KubeconfigPath, tc.node); err != nil {
				t.Fatalf("second aisched agent --once: %v\n%s", err, out)
			}
			again, err := client.AischedV1alpha1().NodeMetrics().Get(ctx, tc.node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if again.UID != nm.UID || again.ResourceVersion == nm.ResourceVersion {
				t.Errorf("second run: uid %s resourceVersion %s, want uid %s with a newer resourceVersion than %s", again.UID, again.ResourceVersion, nm.UID, nm.ResourceVersion)
			}
			checkAgentSample(t, again)
		})
	}

	// Deleting the Node deletes its NodeMetrics (the garbage collector
	// follows the owner reference).
	if err := c.Client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	localtest.Eventually(t, time.Minute, "NodeMetrics agent-node deleted with its Node", func(ctx context.Context) (bool, error) {
		_, err := client.AischedV1alpha1().NodeMetrics().Get(ctx, node.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// checkAgentSample checks a sample of this machine, published by
// runAgentOnce.
func checkAgentSample(t *testing.T, nm *aischedv1alpha1.NodeMetrics) {
	t.Helper()
	s := nm.Status
	status, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s", nm.Name, status)
	// sampleTime has whole seconds.
	if age := time.Since(s.SampleTime.Time); age < -time.Second || age > time.Minute {
		t.Errorf("sampleTime %s is %s old, want within the last minute", s.SampleTime, age)
	}
	if s.Source != aischedv1alpha1.MetricsSourceAgent {
		t.Errorf("source %q, want %q", s.Source, aischedv1alpha1.MetricsSourceAgent)
	}
	if w := s.Window.Duration; w < 200*time.Millisecond || w > 5*time.Second {
		t.Errorf("window %s, want about 200ms", w)
	}
	for _, r := range []struct {
		name  string
		value *int32
	}{{"cpu", s.Utilization.CPU}, {"memory", s.Utilization.Memory}} {
		if r.value == nil || *r.value < 0 || *r.value > 100 {
			t.Errorf("utilization.%s %v, want a percentage", r.name, r.value)
		}
	}
	switch p := s.Performance; {
	case int(p.Cores) == runtime.NumCPU():
	case p.Cores > 0:
		// A container's CPU set can make NumCPU smaller than the machine's.
		t.Logf("performance.cores %d, runtime.NumCPU() %d", p.Cores, runtime.NumCPU())
	default:
		t.Errorf("performance.cores %d, want %d", p.Cores, runtime.NumCPU())
	}
	if m := s.Performance.Memory; m == nil || m.Sign() <= 0 {
		t.Errorf("performance.memory %v, want > 0", m)
	}
	if s.Performance.DiskMBps != 100 {
		t.Errorf("performance.diskMBps %d, want 100 (--disk-mbps)", s.Performance.DiskMBps)
	}
}

// TestAgentFlags checks that bad command lines and an unreachable apiserver
// fail --once with one line naming the problem.
func TestAgentFlags(t *testing.T) {
	// Not parallel: the child processes must see neither NODE_NAME nor,
	// when the tests run in a pod, the in-cluster apiserver.
	t.Setenv("NODE_NAME", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	unreachable := unreachableKubeconfig(t)
	tests := []struct {
		name string
		args []string
		// wantLine is in the last line of the output, the only one that
		// starts with "aisched agent:".
		wantLine string
	}{
		{
			name:     "no node name",
			args:     []string{"--once"},
			wantLine: "aisched agent: --node-name is required (or set NODE_NAME)",
		},
		{
			name:     "bad node name",
			args:     []string{"--once", "--node-name", "Node_1"},
			wantLine: `aisched agent: --node-name "Node_1": a lowercase RFC 1123 subdomain`,
		},
		{
			name:     "window longer than the interval",
			args:     []string{"--once", "--node-name", "n1", "--window", "20s"},
			wantLine: "aisched agent: --window 20s: longer than --interval 10s",
		},
		{
			name:     "unknown delivery",
			args:     []string{"--once", "--node-name", "n1", "--gpu-delivery", "plugin"},
			wantLine: `aisched agent: --gpu-delivery "plugin": want "nri" or "none"`,
		},
		{
			name:     "delivery with --once",
			args:     []string{"--once", "--node-name", "n1", "--gpu-delivery", "nri"},
			wantLine: "aisched agent: --gpu-delivery=nri serves the runtime: it cannot go with --once",
		},
		{
			name:     "relative HAMi-core library",
			args:     []string{"--node-name", "n1", "--gpu-delivery", "nri", "--gpu-isolation", "hami-core", "--hami-core-library", "libvgpu.so"},
			wantLine: `aisched agent: --gpu-device-naming, --gpu-isolation: HAMi-core library "libvgpu.so": want the absolute host path of libvgpu.so`,
		},
		{
			name:     "no kubeconfig outside a pod",
			args:     []string{"--once", "--node-name", "n1", "--disk-mbps", "100"},
			wantLine: "aisched agent: --kubeconfig not set and not in a pod: unable to load in-cluster configuration",
		},
		{
			name:     "unreachable apiserver",
			args:     []string{"--once", "--node-name", "n1", "--disk-mbps", "100", "--window", "100ms", "--kubeconfig", unreachable},
			wantLine: "aisched agent: reading NodeMetrics n1: Get ",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			begin := time.Now()
			out, err := runCommand(t, append([]string{"agent"}, tc.args...)...)
			took := time.Since(begin)
			if err == nil {
				t.Fatalf("aisched agent %s succeeded, want a failure:\n%s", strings.Join(tc.args, " "), out)
			}
			checkErrorLine(t, out, tc.wantLine)
			if took > 30*time.Second {
				t.Errorf("took %s, want a failure within 30s", took)
			}
		})
	}
}

// checkErrorLine checks that the last line of out, and only it, is an
// error of aisched agent, and that it contains want.
func checkErrorLine(t *testing.T, out, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var errorLines []string
	for _, l := range lines {
		if strings.HasPrefix(l, "aisched agent:") {
			errorLines = append(errorLines, l)
		}
	}
	if len(errorLines) != 1 || errorLines[0] != lines[len(lines)-1] || !strings.Contains(errorLines[0], want) {
		t.Errorf("output:\n%s\nwant one last line containing %q", out, want)
	}
}

// unreachableKubeconfig writes a kubeconfig whose server is a port that
// nothing listens on.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["closed"] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://127.0.0.1:%d", freePort(t)), InsecureSkipTLSVerify: true}
	cfg.AuthInfos["nobody"] = &clientcmdapi.AuthInfo{Token: "x"}
	cfg.Contexts["closed"] = &clientcmdapi.Context{Cluster: "closed", AuthInfo: "nobody"}
	cfg.CurrentContext = "closed"
	path := filepath.Join(t.TempDir(), "closed.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAgentManifests installs the Helm chart's agent (with its admission
// policies) in a cluster: the DaemonSet runs on every node, whatever its taints, and
// the admission policy lets the agent's service account, with the token of
// the agent's pod, write only the objects of that pod's node.
func TestAgentManifests(t *testing.T) {
	t.Parallel()
	c := localtest.Start(t, local.Options{})
	ctx := context.Background()
	installChart(t, c, renderChart(t, onlyComponents("agent")...))

	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	localtest.Eventually(t, time.Minute, "the agent available on every node", func(ctx context.Context) (bool, error) {
		ds, err := c.Client.AppsV1().DaemonSets("aisched-system").Get(ctx, "aisched-agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return daemonSetAvailable(ds) && int(ds.Status.DesiredNumberScheduled) == len(nodes.Items),
			fmt.Errorf("status %+v, %d nodes", ds.Status, len(nodes.Items))
	})
	pods, err := c.Client.CoreV1().Pods("aisched-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=aisched-agent"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("agent pods: %v, %v", pods, err)
	}
	pod := &pods.Items[0]
	node := pod.Spec.NodeName
	const other = "agent-other-node"

	agentKubeconfig := tokenKubeconfig(t, c, "aisched-agent", serviceAccountToken(t, c, "aisched-system", "aisched-agent", pod))
	unboundKubeconfig := serviceAccountKubeconfig(t, c, "aisched-system", "aisched-agent")
	agent, agentKube := clientsOf(t, agentKubeconfig)
	unbound, _ := clientsOf(t, unboundKubeconfig)
	admin := versioned.NewForConfigOrDie(c.Config)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	createMetrics := func(client versioned.Interface, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := client.AischedV1alpha1().NodeMetrics().Create(ctx, &aischedv1alpha1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: name}}, dryRun)
			return err
		}
	}
	createInventory := func(name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := agent.AischedV1alpha1().GPUInventories().Create(ctx, &aischedv1alpha1.GPUInventory{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       aischedv1alpha1.GPUInventorySpec{GPUs: []aischedv1alpha1.GPU{{Index: 0, Model: "Tesla-T4", MemoryMiB: 15360}}},
			}, dryRun)
			return err
		}
	}

	// The policy takes effect once the apiserver has loaded it; until
	// then RBAC alone lets the dry run through.
	localtest.Eventually(t, time.Minute, "the policy denies the agent another node's NodeMetrics", func(ctx context.Context) (bool, error) {
		err := createMetrics(agent, other)(ctx)
		return apierrors.IsForbidden(err), err
	})

	otherMetrics, err := admin.AischedV1alpha1().NodeMetrics().Create(ctx, &aischedv1alpha1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	denied := fmt.Sprintf("aisched-agent on node %s may write only the %%s named %s, not %s", node, node, other)
	// Pods to annotate: one on the agent's node, one elsewhere.
	podOn := func(name, nodeName string) *corev1.Pod {
		p, err := c.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
			Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var otherNode string
	for _, n := range nodes.Items {
		if n.Name != node {
			otherNode = n.Name
		}
	}
	ownPod, otherPod := podOn("agent-own-node-pod", node), podOn("agent-other-node-pod", otherNode)
	patchPod := func(p *corev1.Pod, patch string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := agentKube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	locateOnly := "aisched-agent may change only the annotation gpu.aisched.io/located of a pod"
	// The pod policy is loaded apart from the first one.
	localtest.Eventually(t, time.Minute, "the policy denies the agent another annotation of a pod", func(ctx context.Context) (bool, error) {
		err := patchPod(ownPod, `{"metadata":{"annotations":{"gpu.aisched.io/assigned":"0"}}}`)(ctx)
		return apierrors.IsForbidden(err), err
	})
	tests := []struct {
		name  string
		write func(context.Context) error
		// wantErr is in the error; "" when the write must pass.
		wantErr string
	}{
		{name: "own NodeMetrics", write: createMetrics(agent, node)},
		{name: "own GPUInventory", write: createInventory(node)},
		{name: "own Node read", write: func(ctx context.Context) error {
			_, err := agentKube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			return err
		}},
		{name: "another node's NodeMetrics", write: createMetrics(agent, other), wantErr: fmt.Sprintf(denied, "nodemetrics")},
		{name: "another node's GPUInventory", write: createInventory(other), wantErr: fmt.Sprintf(denied, "gpuinventories")},
		{name: "another node's NodeMetrics status", write: func(ctx context.Context) error {
			m := otherMetrics.DeepCopy()
			m.Status = aischedv1alpha1.NodeMetricsStatus{SampleTime: metav1.Now(), Window: metav1.Duration{Duration: 10 * time.Second}}
			_, err := agent.AischedV1alpha1().NodeMetrics().UpdateStatus(ctx, m, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, wantErr: fmt.Sprintf(denied, "nodemetrics")},
		{name: "token not bound to a pod", write: createMetrics(unbound, node), wantErr: "aisched-agent may write nodemetrics only with a token bound to a pod on a node"},
		{name: "locate a pod of its node", write: patchPod(ownPod, `{"metadata":{"annotations":{"gpu.aisched.io/located":"0"}}}`)},
		{name: "locate a pod of another node", write: patchPod(otherPod, `{"metadata":{"annotations":{"gpu.aisched.io/located":"0"}}}`),
			wantErr: fmt.Sprintf("aisched-agent on node %s may annotate only pods of its node, not a pod of %s", node, otherNode)},
		{name: "another annotation", write: patchPod(ownPod, `{"metadata":{"annotations":{"gpu.aisched.io/assigned":"0"}}}`), wantErr: locateOnly},
		{name: "a label", write: patchPod(ownPod, `{"metadata":{"labels":{"app":"other"}}}`), wantErr: locateOnly},
		{name: "an image", write: patchPod(ownPod, `{"spec":{"containers":[{"name":"main","image":"evil"}]}}`), wantErr: locateOnly},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write(ctx)
			switch {
			case tc.wantErr == "" && apierrors.IsAlreadyExists(err):
				// Admission passed; a simulated node published first.
			case tc.wantErr == "" && err != nil:
				t.Errorf("denied: %v", err)
			case tc.wantErr != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want Forbidden containing %q", err, tc.wantErr)
			}
		})
	}

	// The agent itself, with its pod's token, fails to publish for
	// another node.
	out, err := runAgentOnce(t, agentKubeconfig, other)
	if err == nil {
		t.Fatalf("aisched agent --once --node-name %s with the token of a pod on %s succeeded:\n%s", other, node, out)
	}
	checkErrorLine(t, out, fmt.Sprintf(denied, "nodemetrics"))
}

// clientsOf returns the clients of a kubeconfig.
func clientsOf(t *testing.T, kubeconfig string) (versioned.Interface, kubernetes.Interface) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return versioned.NewForConfigOrDie(cfg), kubernetes.NewForConfigOrDie(cfg)
}
