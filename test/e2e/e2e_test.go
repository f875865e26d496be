package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/podgroup"
)

const (
	// release and system are the chart's release and namespace.
	release = "aisched"
	system  = "aisched-system"
	// ns holds the suite's own pods.
	ns = "e2e"
)

// The cluster's nodes (hack/node-e2e/e2e.sh): two with two fake cards
// each (Tesla V100-SXM2-32GB), one without.
var (
	nodes    = []string{"node-1", "node-2", "node-3"}
	gpuNodes = []string{"node-1", "node-2"}
)

// TestE2E is the suite: each step builds on the cluster the last one
// left, so the first that fails ends it.
func TestE2E(t *testing.T) {
	c := connect(t)
	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"install", c.install},
		{"gpu-deployment", c.gpuDeployment},
		{"shares", c.shares},
		{"gang", c.gang},
		{"platform", c.platform},
		{"console", c.console},
		{"scheduler-failover", c.schedulerFailover},
		{"upgrade", c.upgrade},
		{"uninstall", c.uninstall},
	}
	for _, s := range steps {
		start := time.Now()
		if !t.Run(s.name, s.run) {
			t.Fatalf("step %s failed; the later steps need it", s.name)
		}
		t.Logf("e2e: step %s passed in %s", s.name, time.Since(start).Round(time.Second))
	}
	t.Logf("e2e: all %d steps passed in %s", len(steps), time.Since(c.begin).Round(time.Second))
}

// chartValues are the values of the suite's install and upgrade: the
// release image of build (0 or 1) by digest, imported into the nodes (no
// registry), and HAMi-core's limiter on the nodes (a stand-in file: the
// containers get its path and the limits, which is what the suite reads).
func (c *cluster) chartValues(build int) []string {
	return []string{
		"--set", "image.repository=" + c.image, "--set", "image.digest=" + c.digests[build], "--set", "image.pullPolicy=Never",
		"--set", "agent.gpu.isolation=hami-core", "--set", "agent.gpu.hamiCoreLibrary=" + filepath.Join(c.dir, "libvgpu.so"),
		"--wait", "--timeout", "10m",
	}
}

// workloads are the chart's Deployments and their replicas by default.
var workloads = map[string]int32{"aisched-scheduler": 2, "aisched-controller": 2, "aisched-gateway": 2, "aisched-console": 1}

func (c *cluster) install(t *testing.T) {
	c.run(t, c.helm, append([]string{"install", release, "charts/aisched", "--namespace", system, "--create-namespace"}, c.chartValues(0)...)...)
	c.ok(t, "helm install %s charts/aisched with image %s@%s", release, c.image, c.digests[0])
	c.checkWorkloads(t, c.digests[0])

	// The agents publish the fake cards, read with nvidia-smi that the
	// node's NVIDIA runtime stand-in put into their containers; the
	// device plugin gives the kubelet its nvidia.com/gpu.
	for _, n := range gpuNodes {
		c.eventually(t, 2*time.Minute, "GPUInventory "+n+" with 2 cards", func(ctx context.Context) (bool, error) {
			inv, err := c.aisched.AischedV1alpha1().GPUInventories().Get(ctx, n, metav1.GetOptions{})
			return err == nil && len(inv.Spec.GPUs) == 2, err
		})
		node, err := c.client.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if q := node.Status.Allocatable[gpu.ResourceName]; q.Value() != 2 {
			t.Fatalf("node %s: allocatable nvidia.com/gpu %s, want 2 (the device plugin's)", n, q.String())
		}
		c.ok(t, "node %s: GPUInventory of 2 cards from its agent, nvidia.com/gpu 2 from the device plugin", n)
	}
	if _, err := c.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkWorkloads checks that every Deployment and the DaemonSet of the
// chart is ready with real containers of the image digest.
func (c *cluster) checkWorkloads(t *testing.T, digest string) {
	t.Helper()
	apps := c.client.AppsV1()
	for name, replicas := range workloads {
		c.eventually(t, 5*time.Minute, "Deployment "+name+" ready", func(ctx context.Context) (bool, error) {
			d, err := apps.Deployments(system).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return d.Status.ReadyReplicas == replicas && d.Status.UpdatedReplicas == replicas && d.Status.Replicas == replicas, fmt.Errorf("status %+v", d.Status)
		})
	}
	c.eventually(t, 5*time.Minute, "DaemonSet aisched-agent ready on every node", func(ctx context.Context) (bool, error) {
		ds, err := apps.DaemonSets(system).Get(ctx, "aisched-agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := ds.Status
		return s.DesiredNumberScheduled == int32(len(nodes)) && s.NumberReady == s.DesiredNumberScheduled && s.UpdatedNumberScheduled == s.DesiredNumberScheduled, fmt.Errorf("status %+v", s)
	})
	pods, err := c.client.CoreV1().Pods(system).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byWorkload := map[string][]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		name := p.Labels["app.kubernetes.io/name"]
		if !strings.Contains(p.Spec.Containers[0].Image, digest) {
			t.Errorf("pod %s runs %s, want the image %s", p.Name, p.Spec.Containers[0].Image, digest)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if !cs.Ready || !strings.HasPrefix(cs.ContainerID, "containerd://") || cs.State.Running == nil {
				t.Errorf("pod %s container %s: ready %t, id %q, state %+v: want a running containerd container", p.Name, cs.Name, cs.Ready, cs.ContainerID, cs.State)
			}
		}
		if !slices.Contains(nodes, p.Spec.NodeName) {
			t.Errorf("pod %s on %q, not a node of the cluster", p.Name, p.Spec.NodeName)
		}
		byWorkload[name] = append(byWorkload[name], p.Spec.NodeName)
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range byWorkload {
			if !yield(n) {
				return
			}
		}
	}) {
		c.ok(t, "%s: %d pods ready, containerd containers of %s, on %s", name, len(byWorkload[name]), shortDigest(digest), strings.Join(byWorkload[name], ","))
	}
	if t.Failed() {
		t.FailNow()
	}
}

func shortDigest(d string) string { return d[:min(len(d), len("sha256:")+12)] }

// uuidsOf reads the card UUIDs nvidia-smi -L lists inside the pod's
// container (the stand-in lists those of NVIDIA_VISIBLE_DEVICES, as the
// real one lists the devices the container has).
func (c *cluster) uuidsOf(t *testing.T, p *corev1.Pod) []string {
	t.Helper()
	out := c.exec(t, p, "/usr/bin/nvidia-smi", "-L")
	var uuids []string
	for _, m := range regexp.MustCompile(`\(UUID: ([^)]+)\)`).FindAllStringSubmatch(out, -1) {
		uuids = append(uuids, m[1])
	}
	return uuids
}

// assignedUUIDs are the cards the scheduler chose for a bound pod.
func assignedUUIDs(p *corev1.Pod) []string {
	v := p.Annotations[gpu.AssignedUUIDsAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// envOf reads variables in the pod's container.
func (c *cluster) envOf(t *testing.T, p *corev1.Pod, keys ...string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(c.exec(t, p, append([]string{"/probe", "getenv"}, keys...)...)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

func gpuLimits(p *corev1.Pod, kv ...string) *corev1.Pod {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: l}
	return p
}

// gpuDeployment: a Deployment scheduled by aisched, each container seeing
// the cards aisched chose.
func (c *cluster) gpuDeployment(t *testing.T) {
	ctx := context.Background()
	tmpl := gpuLimits(probePod(ns, "gpu-demo", "aisched"), "nvidia.com/gpu", "1")
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu-demo"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec},
		},
	}
	d.Spec.Template.Namespace, d.Spec.Template.Name = "", ""
	if _, err := c.client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, 3*time.Minute, "Deployment gpu-demo available", func(ctx context.Context) (bool, error) {
		d, err := c.client.AppsV1().Deployments(ns).Get(ctx, "gpu-demo", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 2, err
	})
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "e2e=gpu-demo"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		want := assignedUUIDs(p)
		if len(want) != 1 {
			t.Fatalf("pod %s: assigned %q; want one card chosen by aisched", p.Name, p.Annotations[gpu.AssignedUUIDsAnnotation])
		}
		got := c.uuidsOf(t, p)
		if !slices.Equal(got, want) {
			t.Errorf("pod %s on %s: nvidia-smi -L inside lists %v, aisched chose %v", p.Name, p.Spec.NodeName, got, want)
		}
		if other, ok := seen[want[0]]; ok {
			t.Errorf("pods %s and %s got the same card %s", other, p.Name, want[0])
		}
		seen[want[0]] = p.Name
		c.ok(t, "pod %s on %s, placed by aisched: nvidia-smi -L inside lists exactly its card %s", p.Name, p.Spec.NodeName, want[0])
	}
	if err := c.client.AppsV1().Deployments(ns).Delete(ctx, "gpu-demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.deletePods(t, ns, "e2e=gpu-demo")
}

// shares: two shares on one card, each with its own limits; HAMi's
// default_use (two cards, a share of each); a share of memory in percent.
func (c *cluster) shares(t *testing.T) {
	lib := filepath.Join(c.dir, "libvgpu.so")
	share := func(name, milli, mib string) *corev1.Pod {
		p := probePod(ns, name, "aisched")
		p.Labels["e2e-step"] = "shares"
		p.Annotations[gpu.MilliAnnotation], p.Annotations[gpu.GPUMemAnnotation] = milli, mib
		return p
	}
	// One after the other, so that the second packs onto the first's card.
	c.createPods(t, share("share-1", "300", "4000"))
	c.running(t, ns, "share-1")
	c.createPods(t, share("share-2", "500", "8000"))
	shared := c.running(t, ns, "share-1", "share-2")
	card := assignedUUIDs(shared[0])
	if len(card) != 1 || !slices.Equal(assignedUUIDs(shared[1]), card) || shared[0].Spec.NodeName != shared[1].Spec.NodeName {
		t.Fatalf("share-1 on %s %v, share-2 on %s %v: want one card", shared[0].Spec.NodeName, card, shared[1].Spec.NodeName, assignedUUIDs(shared[1]))
	}
	for i, want := range []map[string]string{
		{"CUDA_DEVICE_MEMORY_LIMIT_0": "4000m", "CUDA_DEVICE_SM_LIMIT": "30"},
		{"CUDA_DEVICE_MEMORY_LIMIT_0": "8000m", "CUDA_DEVICE_SM_LIMIT": "50"},
	} {
		want["NVIDIA_VISIBLE_DEVICES"], want["LD_PRELOAD"] = card[0], lib
		got := c.envOf(t, shared[i], "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_MEMORY_LIMIT_0", "CUDA_DEVICE_MEMORY_LIMIT_1", "CUDA_DEVICE_SM_LIMIT", "LD_PRELOAD")
		if !mapsEqual(got, want) {
			t.Errorf("pod %s: environment %v, want %v", shared[i].Name, got, want)
		}
	}
	c.ok(t, "share-1 and share-2 share card %s on %s: 4000m/30%% and 8000m/50%% in their containers, HAMi-core's library preloaded", card[0], shared[0].Spec.NodeName)

	// HAMi's examples/nvidia/default_use.yaml, as written, with
	// schedulerName: aisched.
	defaultUse := gpuLimits(probePod(ns, "default-use", "aisched"), "nvidia.com/gpu", "2", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30")
	defaultUse.Labels["e2e-step"] = "shares"
	percent := probePod(ns, "percent", "aisched")
	percent.Labels["e2e-step"] = "shares"
	percent.Annotations[gpu.HAMiGPUMemPercentAnnotation] = "25"
	c.createPods(t, defaultUse, percent)
	pods := c.running(t, ns, "default-use", "percent")
	want := assignedUUIDs(pods[0])
	got := c.uuidsOf(t, pods[0])
	if len(want) != 2 || want[0] == want[1] || !slices.Equal(got, want) {
		t.Errorf("default-use: aisched chose %v, nvidia-smi -L inside lists %v; want two distinct cards, the same", want, got)
	}
	env := c.envOf(t, pods[0], "CUDA_DEVICE_MEMORY_LIMIT_0", "CUDA_DEVICE_MEMORY_LIMIT_1", "CUDA_DEVICE_SM_LIMIT")
	if wantEnv := map[string]string{"CUDA_DEVICE_MEMORY_LIMIT_0": "3000m", "CUDA_DEVICE_MEMORY_LIMIT_1": "3000m", "CUDA_DEVICE_SM_LIMIT": "30"}; !mapsEqual(env, wantEnv) {
		t.Errorf("default-use: environment %v, want %v", env, wantEnv)
	}
	c.ok(t, "HAMi's default_use on %s: two distinct cards %v delivered, 3000m of each and 30%%", pods[0].Spec.NodeName, got)
	// 25% of a 32768 MiB card.
	env = c.envOf(t, pods[1], "CUDA_DEVICE_MEMORY_LIMIT_0", "NVIDIA_VISIBLE_DEVICES")
	if env["CUDA_DEVICE_MEMORY_LIMIT_0"] != "8192m" || pods[1].Annotations[gpu.AssignedGPUMemAnnotation] != "8192" || env["NVIDIA_VISIBLE_DEVICES"] != strings.Join(assignedUUIDs(pods[1]), ",") {
		t.Errorf("percent: environment %v, %s=%q; want 25%% of its 32768 MiB card, 8192", env, gpu.AssignedGPUMemAnnotation, pods[1].Annotations[gpu.AssignedGPUMemAnnotation])
	}
	c.ok(t, "a share of 25%% of a card's memory: 8192m of card %s", env["NVIDIA_VISIBLE_DEVICES"])
	c.deletePods(t, ns, "e2e-step=shares")
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// gang: a group that cannot be placed whole gets no pod bound; one that
// can is placed whole.
func (c *cluster) gang(t *testing.T) {
	ctx := context.Background()
	member := func(group string, i, size int) *corev1.Pod {
		p := gpuLimits(probePod(ns, fmt.Sprintf("%s-%d", group, i), "aisched"), "nvidia.com/gpu", "2")
		p.Labels["e2e-step"] = "gang"
		p.Labels[podgroup.NameLabel], p.Labels[podgroup.MinAvailableLabel] = group, fmt.Sprint(size)
		return p
	}
	// Three pods of two cards: six cards, the cluster has four.
	c.createPods(t, member("too-big", 0, 3), member("too-big", 1, 3), member("too-big", 2, 3))
	c.eventually(t, 2*time.Minute, "PodGroup too-big held as unplaceable", func(ctx context.Context) (bool, error) {
		pg, err := c.aisched.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "too-big", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted)
		return cond != nil && cond.Reason == string(jobqueue.ReasonUnplaceable), fmt.Errorf("conditions %v", pg.Status.Conditions)
	})
	c.createPods(t, member("whole", 0, 2), member("whole", 1, 2))
	pods := c.running(t, ns, "whole-0", "whole-1")
	var cards []string
	for _, p := range pods {
		cards = append(cards, c.uuidsOf(t, p)...)
	}
	if slices.Sort(cards); len(slices.Compact(slices.Clone(cards))) != 4 || pods[0].Spec.NodeName == pods[1].Spec.NodeName {
		t.Errorf("gang whole on %s and %s with cards %v: want both GPU nodes, four distinct cards", pods[0].Spec.NodeName, pods[1].Spec.NodeName, cards)
	}
	list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podgroup.NameLabel + "=too-big"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			t.Errorf("gang member %s bound to %s while its gang cannot be placed whole", p.Name, p.Spec.NodeName)
		}
	}
	c.ok(t, "gang too-big (3 x 2 cards) held as unplaceable, none bound; gang whole (2 x 2 cards) placed whole on %s and %s", pods[0].Spec.NodeName, pods[1].Spec.NodeName)
	c.deletePods(t, ns, "e2e-step=gang")
}

// platform: the example of examples/platform answers through the gateway's
// NodePort, called from outside the cluster.
func (c *cluster) platform(t *testing.T) {
	ctx := context.Background()
	c.kubectl(t, "apply", "-f", "examples/platform")
	c.kubectl(t, "-n", "ai-demo", "wait", "--for=condition=Ready", "aiservice/sum", "--timeout=5m")
	svc, err := c.client.CoreV1().Services(system).Get(ctx, "aisched-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nodePort int32
	for _, p := range svc.Spec.Ports {
		nodePort = p.NodePort
	}
	secret, err := c.client.CoreV1().Secrets("ai-demo").Get(ctx, "sum-keys", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://%s:%d/ai-demo/sum/v2/models/sum/infer", c.nodeIP(t, "node-3"), nodePort)
	const request = `{"inputs":[{"name":"x","shape":[4],"datatype":"FP64","data":[1,2,3,4]}]}`
	var answer string
	c.eventually(t, 2*time.Minute, "the model's answer through the gateway at "+url, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(request))
		if err != nil {
			return false, err
		}
		req.Header.Set("Authorization", "Bearer "+string(secret.Data["demo-user"]))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		answer = string(body)
		return err == nil && resp.StatusCode == http.StatusOK, fmt.Errorf("%s: %s", resp.Status, body)
	})
	if !strings.Contains(answer, `"model_name":"sum"`) || !strings.Contains(answer, `"data":[10]`) {
		t.Fatalf("answer %s: want the sum 10 from model sum", answer)
	}
	c.ok(t, "examples/platform: the model answered 10 through the gateway's NodePort %s, called from outside the cluster", url)
	if err := c.client.CoreV1().Namespaces().Delete(ctx, "ai-demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, 3*time.Minute, "namespace ai-demo gone", func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().Namespaces().Get(ctx, "ai-demo", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// console: reached through port-forward, it signs in with a service
// account's token and shows the GPU nodes as that account may see them.
func (c *cluster) console(t *testing.T) {
	ctx := context.Background()
	rbac := c.client.RbacV1()
	if _, err := c.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-gpu-viewer"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"aisched.io"}, Resources: []string{"gpuinventories"}, Verbs: []string{"get", "list", "watch"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-gpu-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "e2e-gpu-viewer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "viewer"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "viewer", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.client.CoreV1().Pods(system).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=aisched-console"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("console pods: %v (%d)", err, len(pods.Items))
	}
	addr := c.portForward(t, &pods.Items[0], 8490)
	base := "http://" + addr
	get := func(cookie *http.Cookie) (int, []byte) {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/gpus", nil)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	if code, _ := get(nil); code != http.StatusUnauthorized {
		t.Errorf("GET /api/gpus without signing in: %d, want 401", code)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/api/login", strings.NewReader(fmt.Sprintf(`{"token": %q}`, tr.Status.Token)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) == 0 {
		t.Fatalf("POST /api/login with the account's token: %s %s", resp.Status, body)
	}
	code, body := get(resp.Cookies()[0])
	var m struct {
		// Without a topology, a line per node with its cards counted.
		Nodes []struct {
			Name   string `json:"name"`
			Counts struct {
				Total int `json:"total"`
			} `json:"counts"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(body, &m); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/gpus signed in: %d %s (%v)", code, body, err)
	}
	var got []string
	for _, n := range m.Nodes {
		got = append(got, fmt.Sprintf("%s:%d", n.Name, n.Counts.Total))
	}
	if want := []string{"node-1:2", "node-2:2"}; !slices.Equal(got, want) {
		t.Errorf("the console's GPU map lists %v, want %v", got, want)
	}
	c.ok(t, "the console through port-forward (%s): 401 without a token, signed in with a service account's token, its GPU map lists %v", addr, got)
}

// schedulerFailover: the scheduler's leader pod is deleted; the standby
// takes the lease over and places pods on the cards the old leader left
// free, none on a card given already.
func (c *cluster) schedulerFailover(t *testing.T) {
	ctx := context.Background()
	one := func(name string) *corev1.Pod {
		p := gpuLimits(probePod(ns, name, "aisched"), "nvidia.com/gpu", "1")
		p.Labels["e2e-step"] = "failover"
		return p
	}
	c.createPods(t, one("before-0"), one("before-1"))
	c.running(t, ns, "before-0", "before-1")
	lease, err := c.client.CoordinationV1().Leases(system).Get(ctx, "aisched-scheduler", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("the scheduler's lease: %v %+v", err, lease)
	}
	leader, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	pods, err := c.client.CoreV1().Pods(system).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=aisched-scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	var standby string
	for _, p := range pods.Items {
		if p.Name != leader {
			standby = p.Name
		}
	}
	// The leader's replacement would race the standby for the released
	// lease: the nodes are cordoned meanwhile, so that it waits.
	c.cordon(t, true)
	if err := c.client.CoreV1().Pods(system).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the leader %s: %v", leader, err)
	}
	deleted := time.Now()
	c.eventually(t, 2*time.Minute, "the standby "+standby+" leading", func(ctx context.Context) (bool, error) {
		l, err := c.client.CoordinationV1().Leases(system).Get(ctx, "aisched-scheduler", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, err
		}
		holder, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
		return holder == standby, fmt.Errorf("holder %s", holder)
	})
	c.ok(t, "leader %s deleted; the standby %s holds the lease %s later", leader, standby, time.Since(deleted).Round(time.Second))
	c.cordon(t, false)
	c.createPods(t, one("after-0"), one("after-1"), one("after-2"))
	c.running(t, ns, "after-0", "after-1")
	c.eventually(t, 2*time.Minute, "after-2 unschedulable: every card is held", func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods(ns).Get(ctx, "after-2", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				return p.Spec.NodeName == "", nil
			}
		}
		return false, fmt.Errorf("node %q, conditions %v", p.Spec.NodeName, p.Status.Conditions)
	})
	held := c.auditCards(t, 4)
	c.ok(t, "the new leader placed after-0 and after-1 on the cards left free and nothing on a card given already (%s); after-2 waits, every card held", held)

	// The agents' drift check (their hook's record against the
	// scheduler's, every 10s) finds every container on the cards it was
	// given; their metrics, on the nodes' addresses, count what their
	// hooks delivered.
	for _, n := range gpuNodes {
		deadline := time.Now().Add(25 * time.Second)
		c.eventually(t, time.Minute, "GPUInventory "+n+" checked, without drift, for 25s", func(ctx context.Context) (bool, error) {
			inv, err := c.aisched.AischedV1alpha1().GPUInventories().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if st := inv.Status; st.CheckTime == nil || st.DriftCount != 0 {
				t.Fatalf("GPUInventory %s: checked %v, drift %d %v; want no drift", n, st.CheckTime, st.DriftCount, st.Drift)
			}
			return time.Now().After(deadline), nil
		})
		metrics := c.agentMetrics(t, n)
		delivered := regexp.MustCompile(`(?m)^aisched_agent_gpu_containers_total\{result="delivered"\} ([0-9]+)`).FindStringSubmatch(metrics)
		if !strings.Contains(metrics, "\naisched_agent_gpu_drift_pods 0\n") || delivered == nil || delivered[1] == "0" {
			t.Errorf("the agent of %s: metrics without drift_pods 0 or containers delivered:\n%s", n, metrics)
		}
		c.ok(t, "the agent of %s: no drift between its hook and the scheduler; its metrics: %s containers delivered, 0 pods drifting", n, delivered[1])
	}
}

// nodeIP is a node's InternalIP, which this machine reaches.
func (c *cluster) nodeIP(t *testing.T, name string) string {
	t.Helper()
	n, err := c.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatalf("node %s has no InternalIP: %v", name, n.Status.Addresses)
	return ""
}

// agentMetrics reads the /metrics of the agent of node, which serves on
// the node's address (host network, port 9102).
func (c *cluster) agentMetrics(t *testing.T, node string) string {
	t.Helper()
	resp, err := http.Get("http://" + c.nodeIP(t, node) + ":9102/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the agent of %s: /metrics: %s %v", node, resp.Status, err)
	}
	return string(body)
}

// cordon marks every node unschedulable, or schedulable again.
func (c *cluster) cordon(t *testing.T, on bool) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on)
	for _, n := range nodes {
		if _, err := c.client.CoreV1().Nodes().Patch(context.Background(), n, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// auditCards checks the running pods' cards against the nodes'
// GPUInventories as a restarted scheduler reads them (gpuledger.Audit):
// no card held by two pods; want cards held in all. It returns them.
func (c *cluster) auditCards(t *testing.T, want int) string {
	t.Helper()
	ctx := context.Background()
	invs, err := c.aisched.AischedV1alpha1().GPUInventories().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string]*gpu.Set{}
	for i := range invs.Items {
		sets[invs.Items[i].Name] = gpu.NewSet(gpu.FromInventory(&invs.Items[i]))
	}
	list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var running []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].Status.Phase == corev1.PodRunning {
			running = append(running, &list.Items[i])
		}
	}
	if problems := gpuledger.Audit(func(node string) *gpu.Set { return sets[node] }, running); len(problems) > 0 {
		t.Fatalf("cards given twice: %v", problems)
	}
	holders := gpuledger.Holders(running)
	if len(holders) != want {
		t.Fatalf("cards held %v, want %d", holders, want)
	}
	var out []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range holders {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, k+"="+holders[k])
	}
	return strings.Join(out, " ")
}

// upgrade: helm upgrade to the second build of the image rolls every
// component; the GPU pods keep running and keep their cards.
func (c *cluster) upgrade(t *testing.T) {
	upgradeStart := time.Now()
	c.run(t, c.helm, append([]string{"upgrade", release, "charts/aisched", "--namespace", system}, c.chartValues(1)...)...)
	// The pre-upgrade hook replaced the CRDs with the new release's; Helm
	// deletes its Job once it succeeded, its events stay.
	events, err := c.client.CoreV1().Events(system).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Job,involvedObject.name=aisched-crds,reason=Completed"})
	if err != nil {
		t.Fatal(err)
	}
	completed := slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		return !at.Before(upgradeStart.Truncate(time.Second))
	})
	if !completed {
		t.Fatalf("no Completed event of the CRD hook's Job aisched-crds since the upgrade began: %v", events.Items)
	}
	c.ok(t, "helm upgrade to the second build %s@%s; its CRD hook's Job ran to completion first", c.image, c.digests[1])
	c.checkWorkloads(t, c.digests[1])
	c.running(t, ns, "before-0", "before-1", "after-0", "after-1")
	held := c.auditCards(t, 4)
	c.ok(t, "the GPU pods run on across the upgrade with their cards: %s", held)
}

// uninstall: helm uninstall leaves what docs/install.md says it leaves.
func (c *cluster) uninstall(t *testing.T) {
	ctx := context.Background()
	c.run(t, c.helm, "uninstall", release, "--namespace", system, "--wait", "--timeout", "5m")
	c.eventually(t, 3*time.Minute, "the chart's pods gone", func(ctx context.Context) (bool, error) {
		pods, err := c.client.CoreV1().Pods(system).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, fmt.Errorf("%d pods left", len(pods.Items))
	})
	if _, err := c.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "aisched-platform", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the webhook configuration aisched-platform outlived the release: %v", err)
	}
	for _, name := range []string{"aisched-agent-own-node", "aisched-agent-locate-only"} {
		if _, err := c.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the admission policy %s outlived the release: %v", name, err)
		}
	}
	crds, err := c.aisched.AischedV1alpha1().GPUInventories().List(ctx, metav1.ListOptions{})
	if err != nil || len(crds.Items) == 0 {
		t.Errorf("GPUInventories after uninstall: %v (%d); docs/install.md: the CRDs and their objects stay", err, len(crds.Items))
	}
	c.running(t, ns, "before-0", "before-1", "after-0", "after-1")
	if p, err := c.client.CoreV1().Pods(ns).Get(ctx, "after-2", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Errorf("after-2: %v, node %q; want it Pending, no aisched to place it", err, p.Spec.NodeName)
	}
	c.ok(t, "helm uninstall: the chart's pods, webhook configuration and admission policies gone; the CRDs and %d GPUInventories stay, running GPU pods run on, after-2 stays Pending (docs/install.md)", len(crds.Items))
}
