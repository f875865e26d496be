package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	platformv1alpha1 "github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/local/modelserver"
)

// TestExamples runs examples/platform/try.sh against `aisched up`, as the
// README tells a newcomer to, with the compiled-in `aisched kubectl`: it
// exits 0 with the model's answer. After a restart of aisched up on the same
// data directory the demo pods answer again. When the model fails, try.sh
// exits non-zero.
func TestExamples(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("try.sh needs %s (apt-get install %s): %v", tool, tool, err)
		}
	}
	dataDir, tmpDir := t.TempDir(), t.TempDir()
	// `aisched` on the test's terms: this test binary as the aisched binary.
	bin := t.TempDir()
	writeFile(t, filepath.Join(bin, "aisched"), "#!/bin/sh\n"+mainEnv+"=1 exec "+os.Args[0]+` "$@"`+"\n")
	if err := os.Chmod(filepath.Join(bin, "aisched"), 0o755); err != nil {
		t.Fatal(err)
	}
	tryScript, err := filepath.Abs(filepath.Join("..", "..", "examples", "platform", "try.sh"))
	if err != nil {
		t.Fatal(err)
	}
	try := func(up *upProcess) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, tryScript)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+up.kubeconfig, "KUBECTL="+filepath.Join(bin, "aisched")+" kubectl")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	up := startUp(t, dataDir, tmpDir)
	out, err := try(up)
	if err != nil || !strings.Contains(out, `"data":[10]`) {
		t.Fatalf("try.sh: %v\n%s", err, out)
	}
	t.Logf("try.sh:\n%s", out)
	up.terminate(t)

	up = startUp(t, dataDir, tmpDir)
	if out, err := try(up); err != nil {
		t.Fatalf("try.sh after a restart: %v\n%s", err, out)
	}

	// The model fails: try.sh must not pass.
	cfg, err := clientcmd.BuildConfigFromFlags("", up.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	api := versioned.NewForConfigOrDie(cfg).PlatformV1alpha1()
	patch := `{"spec":{"podAnnotations":{"` + modelserver.FailPercentAnnotation + `":"100"}}}`
	if _, err := api.OperatorInstances("ai-demo").Patch(context.Background(), "sum", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, up, "ai-demo", "sum")
	if out, err := try(up); err == nil {
		t.Errorf("try.sh with a failing model: exit 0, want an error\n%s", out)
	}
	up.terminate(t)
}

// waitRollout waits until every pod of the instance is of its
// Deployment's latest template.
func waitRollout(t *testing.T, up *upProcess, ns, instance string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		d, err := up.client.AppsV1().Deployments(ns).Get(context.Background(), instance, metav1.GetOptions{})
		if err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas &&
			d.Status.Replicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas {
			pods, err := up.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: platformv1alpha1.InstanceLabel + "=" + instance})
			if err == nil && len(pods.Items) == int(*d.Spec.Replicas) {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("instance %s/%s did not roll out within a minute", ns, instance)
}

// TestGPUDeploymentExample applies examples/gpu-deployment.yaml, which the
// README's "Using the local cluster" applies, to the default local cluster:
// both replicas run, each on cards aisched assigned.
func TestGPUDeploymentExample(t *testing.T) {
	t.Parallel()
	c := localtest.Start(t, local.Options{})
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "gpu-deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	applyManifests(t, c, data, false)
	waitDeploymentAvailable(t, c.Client, "default", "gpu-demo", 2)
	pods, err := c.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=gpu-demo"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.SchedulerName != "aisched" || p.Annotations[gpu.AssignedUUIDsAnnotation] == "" {
			t.Errorf("pod %s: scheduler %s, cards %q; want aisched's", p.Name, p.Spec.SchedulerName, p.Annotations[gpu.AssignedUUIDsAnnotation])
		}
	}
}
