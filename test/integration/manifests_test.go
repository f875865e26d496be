package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/local"
)

// chartDir is aisched's Helm chart.
var chartDir = filepath.Join("..", "..", "charts", "aisched")

// systemNamespace is where the tests install the chart, as the docs do.
const systemNamespace = "aisched-system"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBinary returns the Helm pinned in hack/tools/helm: $AISCHED_HELM
// when set (make test builds it first), else one built once for the test
// run.
func helmBinary(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if helmPath = os.Getenv("AISCHED_HELM"); helmPath != "" {
			return
		}
		dir, err := os.MkdirTemp("", "aisched-helm-")
		if err != nil {
			helmErr = err
			return
		}
		helmPath = filepath.Join(dir, "helm")
		cmd := exec.Command("go", "build", "-modfile=hack/tools/helm/go.mod", "-o", helmPath, "helm.sh/helm/v4/cmd/helm")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			helmErr = fmt.Errorf("building helm: %w\n%s", err, out)
		}
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// runHelm runs helm with the arguments and returns its combined output.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	// No user configuration or cache of the machine running the tests.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// renderChart returns the chart's manifests (helm template, without the
// CRDs) for the release "aisched" in systemNamespace with the extra
// arguments (--set ..., --show-only ...).
func renderChart(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", "aisched", chartDir, "--namespace", systemNamespace}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	return []byte(out)
}

// decodeManifests splits multi-document YAML into objects.
func decodeManifests(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("manifests: %v", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// applyManifests creates every object of multi-document YAML, as
// `kubectl create -f` would, with strict field validation; dryRun asks
// the apiserver to admit them without storing them.
func applyManifests(t *testing.T, c *local.Cluster, data []byte, dryRun bool) {
	t.Helper()
	createObjects(t, c, decodeManifests(t, data), dryRun)
}

// createObjects creates the objects, each in its own namespace when it
// has one, with strict field validation; dryRun asks the apiserver to
// admit them without storing them.
func createObjects(t *testing.T, c *local.Cluster, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	disc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if obj.GetNamespace() != "" {
			ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := ri.Create(context.Background(), obj, opts); err != nil {
			t.Fatalf("create %s %s: %v", gvk.Kind, obj.GetName(), err)
		}
	}
}

// installChart creates systemNamespace and the chart's objects (as
// rendered by renderChart) in it.
func installChart(t *testing.T, c *local.Cluster, manifests []byte) {
	t.Helper()
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	applyManifests(t, c, manifests, false)
}

// configMapFiles writes the data of the ConfigMap name of the manifests
// into a directory, one file per key, as a pod's volume would, and
// returns the directory.
func configMapFiles(t *testing.T, manifests []byte, name string) string {
	t.Helper()
	dir := t.TempDir()
	for _, obj := range decodeManifests(t, manifests) {
		if obj.GetKind() != "ConfigMap" || obj.GetName() != name {
			continue
		}
		data, _, err := unstructured.NestedStringMap(obj.Object, "data")
		if err != nil {
			t.Fatal(err)
		}
		for key, value := range data {
			writeFile(t, filepath.Join(dir, key), value)
		}
		return dir
	}
	t.Fatalf("no ConfigMap %s in the chart's manifests", name)
	return ""
}

// onlyComponents are the --set arguments that render the named components
// of the chart and no other.
func onlyComponents(names ...string) []string {
	var sets []string
	for _, c := range []string{"scheduler", "agent", "controller", "gateway", "console"} {
		sets = append(sets, "--set", fmt.Sprintf("%s.enabled=%t", c, slices.Contains(names, c)))
	}
	return sets
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// service account with a bound token, so that a process runs with exactly
// the permissions its manifests grant.
func serviceAccountKubeconfig(t *testing.T, c *local.Cluster, namespace, name string) string {
	t.Helper()
	return tokenKubeconfig(t, c, name, serviceAccountToken(t, c, namespace, name, nil))
}

// serviceAccountToken returns an hour's token of the service account,
// bound to pod when it is not nil, as the tokens that the kubelet mounts
// into pods are: the apiserver then adds the pod's node to the user's extra
// info.
func serviceAccountToken(t *testing.T, c *local.Cluster, namespace, name string, pod *corev1.Pod) string {
	t.Helper()
	spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}
	if pod != nil {
		spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tok, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

// tokenKubeconfig writes a kubeconfig of the cluster that authenticates
// with the bearer token, and returns its path.
func tokenKubeconfig(t *testing.T, c *local.Cluster, user, token string) string {
	t.Helper()
	ca, err := os.ReadFile(c.Config.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	cfg.CurrentContext = "local"
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
