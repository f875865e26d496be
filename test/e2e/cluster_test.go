package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
)

// cluster is the e2e cluster as the suite reaches it: from this machine,
// outside the nodes' network namespaces, as a user's workstation would.
type cluster struct {
	t          *testing.T
	config     *rest.Config
	client     kubernetes.Interface
	aisched    versioned.Interface
	kubeconfig string
	// dir is e2e.sh's working directory: bin/aisched (kubectl), the
	// stand-in of HAMi-core's library.
	dir, helm, repo string
	// image is the release image's repository, digests its two builds.
	image   string
	digests []string
	begin   time.Time
}

// connect reads the environment e2e.sh sets, or skips the suite with one
// line saying why.
func connect(t *testing.T) *cluster {
	kubeconfig := os.Getenv("AISCHED_E2E_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("no e2e cluster: make test-e2e brings one up (root, runc, iptables and network namespaces) and runs this suite against it")
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	config.QPS, config.Burst = 50, 100
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{
		t: t, config: config, kubeconfig: kubeconfig, repo: repo, begin: time.Now(),
		client:  kubernetes.NewForConfigOrDie(config),
		aisched: versioned.NewForConfigOrDie(config),
		dir:     os.Getenv("AISCHED_E2E_DIR"), helm: os.Getenv("AISCHED_HELM"),
		image: os.Getenv("AISCHED_E2E_IMAGE"), digests: strings.Fields(os.Getenv("AISCHED_E2E_DIGESTS")),
	}
	if c.dir == "" || c.helm == "" || c.image == "" || len(c.digests) != 2 {
		t.Fatal("AISCHED_E2E_DIR, AISCHED_HELM, AISCHED_E2E_IMAGE and AISCHED_E2E_DIGESTS (two) must be set with AISCHED_E2E_KUBECONFIG (make test-e2e sets them)")
	}
	return c
}

// ok reports a check that passed, as one line of the suite's output.
func (c *cluster) ok(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("e2e: ok: "+format, args...)
}

// eventually polls cond every second until it holds; at timeout the test
// fails, saying what it waited for and the last error cond returned.
func (c *cluster) eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		done, err := cond(ctx)
		last = err
		return done, nil
	})
	if err != nil {
		t.Fatalf("waited %s for %s (last error: %v)", timeout, what, last)
	}
}

// run runs a command (helm, kubectl) against the cluster.
func (c *cluster) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig, "HELM_CACHE_HOME="+filepath.Join(c.dir, "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(c.dir, "helm-config"), "HELM_DATA_HOME="+filepath.Join(c.dir, "helm-data"))
	cmd.Dir = c.repo
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kubectl is the kubectl compiled into the host's aisched.
func (c *cluster) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return c.run(t, filepath.Join(c.dir, "bin", "aisched"), append([]string{"kubectl"}, args...)...)
}

// exec runs cmd in a container and returns its standard output.
func (c *cluster) exec(t *testing.T, pod *corev1.Pod, cmd ...string) string {
	t.Helper()
	req := c.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: pod.Spec.Containers[0].Name, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	executor, err := remotecommand.NewSPDYExecutor(c.config, http.MethodPost, req.URL())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		t.Fatalf("exec %v in %s/%s: %v: %s", cmd, pod.Namespace, pod.Name, err, stderr.String())
	}
	return stdout.String()
}

// portForward forwards a local port to port of pod, as kubectl
// port-forward does (through the apiserver and the pod's kubelet), and
// returns the local address; the forward ends with the test.
func (c *cluster) portForward(t *testing.T, pod *corev1.Pod, port int) string {
	t.Helper()
	transport, upgrader, err := spdy.RoundTripperFor(c.config)
	if err != nil {
		t.Fatal(err)
	}
	url := c.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	stop, ready := make(chan struct{}), make(chan struct{})
	var out bytes.Buffer
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	t.Cleanup(func() { close(stop) })
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("port-forward to %s/%s:%d: %v", pod.Namespace, pod.Name, port, err)
	case <-time.After(time.Minute):
		t.Fatalf("port-forward to %s/%s:%d: not ready after a minute", pod.Namespace, pod.Name, port)
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("port-forward ports %v: %v", ports, err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local)
}

// probePod is a pod of the probe image that waits to be stopped, placed
// by scheduler (aisched, or "" for the default scheduler).
func probePod(ns, name, scheduler string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"e2e": name}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			SchedulerName:                 scheduler,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name: "main", Image: "aisched.io/e2e/probe:1", ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
			}},
		},
	}
}

// createPods creates pods and returns them as created.
func (c *cluster) createPods(t *testing.T, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := c.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s: %v", p.Name, err)
		}
	}
}

// running waits until the pods are Running and returns them.
func (c *cluster) running(t *testing.T, ns string, names ...string) []*corev1.Pod {
	t.Helper()
	out := make([]*corev1.Pod, len(names))
	for i, name := range names {
		c.eventually(t, 3*time.Minute, "pod "+ns+"/"+name+" running", func(ctx context.Context) (bool, error) {
			p, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			out[i] = p
			if p.Status.Phase != corev1.PodRunning {
				return false, fmt.Errorf("phase %s, conditions %v, containers %v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
			}
			return true, nil
		})
	}
	return out
}

// deletePods deletes the pods of ns with label selector sel and waits
// until they are gone, so that their cards are free for the next step.
func (c *cluster) deletePods(t *testing.T, ns, sel string) {
	t.Helper()
	ctx := context.Background()
	if err := c.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, 2*time.Minute, "pods "+sel+" of "+ns+" gone", func(ctx context.Context) (bool, error) {
		pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		return err == nil && len(pods.Items) == 0, err
	})
}
