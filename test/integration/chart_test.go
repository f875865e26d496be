package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/version"
)

// TestChart checks the Helm chart as a user meets it: helm lint; every
// set of components renders, pins the release's image and passes a
// server-side dry run against a real apiserver; bad values are refused
// naming the field; the scheduler's configuration is built from values;
// and `helm install` then `helm upgrade` into aisched up end with every
// Deployment and DaemonSet available on the simulated nodes.
// updateRBAC rewrites testdata/rbac.txt from the chart.
var updateRBAC = flag.Bool("update-rbac", false, "rewrite testdata/rbac.txt from the chart's roles")

func TestChart(t *testing.T) {
	t.Parallel()
	if out, err := runHelm(t, "lint", "--strict", chartDir); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	c := localtest.Start(t, local.Options{})
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("component sets", func(t *testing.T) {
		image := "ghcr.io/aisched/aisched:" + version.Release
		for _, tc := range []struct {
			name string
			args []string
			// workloads are the Deployments and DaemonSets rendered.
			workloads []string
			image     string
		}{
			{name: "defaults", workloads: []string{"DaemonSet/aisched-agent", "Deployment/aisched-console", "Deployment/aisched-controller", "Deployment/aisched-gateway", "Deployment/aisched-scheduler"}},
			{name: "console", args: append(onlyComponents("console"), "--set", "console.tls.secretName=console-tls", "--set", "console.replicas=2"), workloads: []string{"Deployment/aisched-console"}},
			{name: "scheduler", args: onlyComponents("scheduler"), workloads: []string{"Deployment/aisched-scheduler"}},
			{name: "agent", args: onlyComponents("agent"), workloads: []string{"DaemonSet/aisched-agent"}},
			{name: "controller", args: onlyComponents("controller"), workloads: []string{"Deployment/aisched-controller"}},
			{name: "gateway", args: onlyComponents("gateway"), workloads: []string{"Deployment/aisched-gateway"}},
			{name: "none", args: onlyComponents()},
			{name: "agent without delivery", args: append(onlyComponents("agent"), "--set", "agent.gpu.delivery=none", "--set", "agent.admissionPolicy.enabled=false"),
				workloads: []string{"DaemonSet/aisched-agent"}},
			{name: "agent with MPS and CDI", args: append(onlyComponents("agent"), "--set", "agent.gpu.isolation=mps", "--set", "agent.gpu.deviceNaming=cdi"),
				workloads: []string{"DaemonSet/aisched-agent"}},
			{name: "single replicas, no webhook", args: []string{"--set", "scheduler.replicas=1", "--set", "controller.replicas=1", "--set", "gateway.replicas=1", "--set", "controller.webhook.enabled=false"},
				workloads: []string{"DaemonSet/aisched-agent", "Deployment/aisched-console", "Deployment/aisched-controller", "Deployment/aisched-gateway", "Deployment/aisched-scheduler"}},
			{name: "assign scheduler", args: append(onlyComponents("controller"), "--set", "controller.webhook.assignScheduler.enabled=true", "--set", "controller.webhook.assignScheduler.gpuPods=true"),
				workloads: []string{"Deployment/aisched-controller"}},
			{name: "by digest", args: append(onlyComponents("scheduler"), "--set", "image.digest=sha256:"+strings.Repeat("ab", 32)),
				workloads: []string{"Deployment/aisched-scheduler"}, image: "ghcr.io/aisched/aisched@sha256:" + strings.Repeat("ab", 32)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				manifests := renderChart(t, tc.args...)
				want := image
				if tc.image != "" {
					want = tc.image
				}
				var workloads []string
				for _, obj := range decodeManifests(t, manifests) {
					if obj.GetKind() != "Deployment" && obj.GetKind() != "DaemonSet" {
						continue
					}
					workloads = append(workloads, obj.GetKind()+"/"+obj.GetName())
					containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
					for _, ctr := range containers {
						if got := ctr.(map[string]any)["image"]; got != want {
							t.Errorf("%s/%s runs image %v, want %s", obj.GetKind(), obj.GetName(), got, want)
						}
					}
				}
				slices.Sort(workloads)
				if !slices.Equal(workloads, tc.workloads) {
					t.Errorf("workloads %v, want %v", workloads, tc.workloads)
				}
				applyManifests(t, c, manifests, true)
			})
		}
	})

	t.Run("service monitors", func(t *testing.T) {
		// The cluster has no prometheus-operator CRDs: rendered only.
		var monitors []string
		for _, obj := range decodeManifests(t, renderChart(t, "--set", "metrics.serviceMonitor.enabled=true")) {
			if obj.GetKind() == "ServiceMonitor" {
				monitors = append(monitors, obj.GetName())
			}
		}
		slices.Sort(monitors)
		if want := []string{"aisched-agent", "aisched-controller", "aisched-gateway", "aisched-scheduler"}; !slices.Equal(monitors, want) {
			t.Errorf("ServiceMonitors %v, want %v", monitors, want)
		}
	})

	t.Run("alerts and dashboard", func(t *testing.T) {
		objs := decodeManifests(t, renderChart(t, "--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.dashboard.enabled=true",
			"--show-only", "templates/monitoring/prometheusrule.yaml", "--show-only", "templates/monitoring/dashboard.yaml"))
		if len(objs) != 2 {
			t.Fatalf("%d monitoring objects, want a PrometheusRule and a dashboard ConfigMap", len(objs))
		}
		alerts := 0
		groups, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "groups")
		for _, g := range groups {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				rule := r.(map[string]any)
				labels, _ := rule["labels"].(map[string]any)
				annotations, _ := rule["annotations"].(map[string]any)
				if rule["alert"] == "" || rule["expr"] == "" || labels["severity"] == nil || annotations["summary"] == nil || annotations["description"] == nil {
					t.Errorf("rule %v: want alert, expr, severity, summary and description", rule)
				}
				alerts++
			}
		}
		if alerts < 8 {
			t.Errorf("%d alerts, want the scheduler's, the agent's and the gateway's", alerts)
		}
		data, _, _ := unstructured.NestedString(objs[1].Object, "data", "aisched.json")
		var dashboard struct {
			Panels []struct {
				Type    string `json:"type"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal([]byte(data), &dashboard); err != nil {
			t.Fatalf("dashboard JSON: %v", err)
		}
		queries := 0
		for _, p := range dashboard.Panels {
			for _, target := range p.Targets {
				if target.Expr == "" {
					t.Errorf("a %s panel with an empty query", p.Type)
				}
				queries++
			}
		}
		if queries < 15 {
			t.Errorf("%d dashboard queries, want GPUs, queue, gangs, scheduler, agents and gateway", queries)
		}
	})

	t.Run("cert-manager", func(t *testing.T) {
		manifests := renderChart(t, append(onlyComponents("controller"), "--set", "controller.webhook.certManager.enabled=true",
			"--set", "controller.webhook.assignScheduler.enabled=true")...)
		var rest bytes.Buffer
		var kinds []string
		for _, obj := range decodeManifests(t, manifests) {
			switch obj.GetKind() {
			case "Certificate":
				dnsNames, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "dnsNames")
				secret, _, _ := unstructured.NestedString(obj.Object, "spec", "secretName")
				issuer, _, _ := unstructured.NestedString(obj.Object, "spec", "issuerRef", "name")
				if !slices.Contains(dnsNames, "aisched-controller."+systemNamespace+".svc") || secret != "aisched-controller-webhook-tls" || issuer != "aisched-selfsigned" {
					t.Errorf("Certificate: names %v, secret %q, issuer %q; want the Service's name into the mounted Secret from the chart's Issuer", dnsNames, secret, issuer)
				}
			case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
				if got := obj.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != systemNamespace+"/aisched-controller-webhook" {
					t.Errorf("%s: inject-ca-from %q, want the Certificate", obj.GetKind(), got)
				}
			case "Role", "ClusterRole":
				rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
				for _, r := range rules {
					resources, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
					names, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resourceNames")
					if slices.Contains(names, "aisched-controller-webhook-tls") || slices.Contains(resources, "validatingwebhookconfigurations") ||
						slices.Contains(resources, "mutatingwebhookconfigurations") {
						t.Errorf("%s %s may touch %v %v: cert-manager keeps the certificate", obj.GetKind(), obj.GetName(), resources, names)
					}
				}
			case "Deployment":
				args, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
				if !strings.Contains(fmt.Sprint(args), "--webhook-cert-dir=/etc/aisched/webhook-tls") {
					t.Errorf("the controller does not read the mounted certificate: %v", args)
				}
			}
			kinds = append(kinds, obj.GetKind())
			if obj.GroupVersionKind().Group == "cert-manager.io" {
				continue // The cluster has no cert-manager CRDs.
			}
			y, err := yaml.Marshal(obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			rest.WriteString("---\n")
			rest.Write(y)
		}
		for _, want := range []string{"Issuer", "Certificate", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
			if !slices.Contains(kinds, want) {
				t.Errorf("no %s among %v", want, kinds)
			}
		}
		applyManifests(t, c, rest.Bytes(), true)
	})

	t.Run("console has no rights", func(t *testing.T) {
		// The console acts as its users: its pod has no token, and no
		// binding names its ServiceAccount.
		for _, obj := range decodeManifests(t, renderChart(t)) {
			switch {
			case obj.GetKind() == "Deployment" && obj.GetName() == "aisched-console":
				automount, found, _ := unstructured.NestedBool(obj.Object, "spec", "template", "spec", "automountServiceAccountToken")
				if !found || automount {
					t.Errorf("the console's pod mounts a service-account token")
				}
				args, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
				joined := fmt.Sprint(args)
				for _, want := range []string{"--gateway-url=http://aisched-gateway." + systemNamespace + ":8480", "--apiserver-ca-file=", "--scheduler-config="} {
					if !strings.Contains(joined, want) {
						t.Errorf("the console's container lacks %s: %s", want, joined)
					}
				}
			case obj.GetKind() == "ClusterRoleBinding" || obj.GetKind() == "RoleBinding":
				subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
				for _, sub := range subjects {
					if sub.(map[string]any)["name"] == "aisched-console" {
						t.Errorf("%s/%s binds the console's ServiceAccount", obj.GetKind(), obj.GetName())
					}
				}
			}
		}
	})

	t.Run("permissions", func(t *testing.T) {
		// Every rule of every component, with every option that adds one:
		// a component that gains a verb fails here until testdata/rbac.txt
		// says so (go test ./test/integration -run TestChart/permissions -update-rbac).
		manifests := renderChart(t, "--set", "controller.webhook.assignScheduler.enabled=true")
		var lines []string
		for _, obj := range decodeManifests(t, manifests) {
			switch obj.GetKind() {
			case "ClusterRoleBinding", "RoleBinding":
				// Bindings to upstream's roles grant as much as rules.
				kind, _, _ := unstructured.NestedString(obj.Object, "roleRef", "kind")
				name, _, _ := unstructured.NestedString(obj.Object, "roleRef", "name")
				subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
				for _, sub := range subjects {
					lines = append(lines, fmt.Sprintf("%s/%s: %s/%s to %v", obj.GetKind(), obj.GetName(), kind, name, sub.(map[string]any)["name"]))
				}
				continue
			case "ClusterRole", "Role":
			default:
				continue
			}
			rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				field := func(name string) string {
					v, _, _ := unstructured.NestedStringSlice(rule, name)
					return strings.Join(v, ",")
				}
				line := fmt.Sprintf("%s/%s: [%s] %s", obj.GetKind(), obj.GetName(), field("apiGroups"), field("resources"))
				if names := field("resourceNames"); names != "" {
					line += " named " + names
				}
				lines = append(lines, line+": "+field("verbs"))
			}
		}
		slices.Sort(lines)
		got := strings.Join(lines, "\n") + "\n"
		golden := filepath.Join("testdata", "rbac.txt")
		if *updateRBAC {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), got); diff != "" {
			t.Errorf("the chart's permissions differ from %s (-want,+got); review what the component calls, then -update-rbac:\n%s", golden, diff)
		}
	})

	t.Run("bad values", func(t *testing.T) {
		for _, tc := range []struct{ set, want string }{
			{"scheduler.replicas=0", "/scheduler/replicas"},
			{"scheduler.shared.jobQueue.backoffSeconds=0", "/scheduler/shared/jobQueue/backoffSeconds"},
			{"scheduler.shared.jobQueue.maxBackoffSeconds=4000", "/scheduler/shared/jobQueue/maxBackoffSeconds"},
			// The key's old name is refused, not ignored.
			{"scheduler.services.jobQueue.backfill=false", "at '/scheduler': additional properties 'services' not allowed"},
			{"scheduler.leaderElection.leaseDuration=15", "/scheduler/leaderElection/leaseDuration"},
			{"agent.gpu.delivery=plugin", "/agent/gpu/delivery"},
			{"agent.gpu.isolation=hami", "/agent/gpu/isolation"},
			{"image.tag=latest", "/image/tag"},
			{"image.digest=sha256:abc", "/image/digest"},
			{"gateway.service.port=70000", "/gateway/service/port"},
			{"controller.webhook.timeoutSeconds=60", "/controller/webhook/timeoutSeconds"},
			{"scheduler.replica=2", "replica"},
			{"controller.webhook.assignScheduler.timeoutSeconds=0", "/controller/webhook/assignScheduler/timeoutSeconds"},
			{"controller.webhook.assignScheduler.excludedNamespaces[0]=Kube_System", "/controller/webhook/assignScheduler/excludedNamespaces/0"},
			{"controller.webhook.certManager.issuerRef.kind=Secret", "/controller/webhook/certManager/issuerRef/kind"},
			{"controller.webhook.certManager.duration=1y", "/controller/webhook/certManager/duration"},
			{"controller.webhook.assignScheduler.enabled=true,controller.webhook.enabled=false", "assignScheduler.enabled needs controller.webhook.enabled"},
			{"controller.webhook.assignScheduler.enabled=true,controller.webhook.assignScheduler.namespaceSelector=null", "set namespaceSelector or gpuPods"},
		} {
			out, err := runHelm(t, "template", "aisched", chartDir, "--set", tc.set)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("--set %s: err=%v output %q, want a refusal naming %s", tc.set, err, out, tc.want)
			}
		}
	})

	t.Run("scheduler configuration from values", func(t *testing.T) {
		manifests := renderChart(t, append(onlyComponents("scheduler"),
			"--set", "scheduler.leaderElection.leaseDuration=30s",
			"--set", "scheduler.shared.jobQueue.backfill=false",
			"--set-json", `scheduler.extraProfiles=[{"schedulerName":"mine","plugins":{"queueSort":{"disabled":[{"name":"*"}],"enabled":[{"name":"Coscheduling"}]},"multiPoint":{"enabled":[{"name":"GPUFit"},{"name":"FGD","weight":5}]}}}]`)...)
		dir := configMapFiles(t, manifests, "aisched-scheduler-config")
		cfg, err := scheduler.ReadConfig(filepath.Join(dir, "scheduler-config.yaml"))
		if err != nil {
			t.Fatalf("the chart's scheduler configuration: %v", err)
		}
		var names []string
		for _, p := range cfg.Profiles {
			names = append(names, p.SchedulerName)
		}
		if want := []string{scheduler.AischedProfile, scheduler.BinpackProfile, scheduler.GPUShareProfile, "mine"}; !slices.Equal(names, want) {
			t.Errorf("profiles %v, want %v", names, want)
		}
		le := cfg.LeaderElection
		if !le.LeaderElect || le.ResourceName != "aisched-scheduler" || le.ResourceNamespace != systemNamespace || le.LeaseDuration.Duration != 30*time.Second {
			t.Errorf("leader election %+v, want on, lease %s/aisched-scheduler of 30s", le, systemNamespace)
		}
		shared, err := aischedconfig.ReadShared(ktesting.NewLogger(t, ktesting.NewConfig()), filepath.Join(dir, "shared-config.yaml"))
		if err != nil {
			t.Fatalf("the chart's shared configuration: %v", err)
		}
		if *shared.JobQueue.Backfill {
			t.Error("scheduler.shared.jobQueue.backfill=false did not reach the shared configuration")
		}
	})

	t.Run("install and upgrade", func(t *testing.T) {
		// The chart requires Kubernetes >= 1.32; the embedded apiserver
		// reports the version that make stamps at link time.
		if v, err := c.Client.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		} else if v.GitVersion != version.Kubernetes {
			t.Skipf("the apiserver reports Kubernetes %s: the test binary was linked without the version; run make test-integration", v.GitVersion)
		}
		helmArgs := func(args ...string) []string {
			return append(args, "--kubeconfig", c.KubeconfigPath, "--namespace", systemNamespace, "--wait", "--timeout", "3m")
		}
		if out, err := runHelm(t, helmArgs("install", "aisched", chartDir)...); err != nil {
			t.Fatalf("helm install: %v\n%s", err, out)
		}
		waitWorkloads(t, c, map[string]int32{"aisched-scheduler": 2, "aisched-controller": 2, "aisched-gateway": 2})
		// The CRD hook's Job runs in the simulated cluster for a second
		// (nodesim runs no image); "crds command" below runs what it runs.
		if out, err := runHelm(t, helmArgs("upgrade", "aisched", chartDir, "--set", "scheduler.replicas=3", "--set", "controller.webhook.enabled=false",
			"--set-string", `crds.podAnnotations.sim\.aisched\.io/run-duration=1s`)...); err != nil {
			t.Fatalf("helm upgrade: %v\n%s", err, out)
		}
		waitWorkloads(t, c, map[string]int32{"aisched-scheduler": 3, "aisched-controller": 2, "aisched-gateway": 2})
		if _, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "aisched-platform", metav1.GetOptions{}); err == nil {
			t.Error("the webhook configuration outlived controller.webhook.enabled=false")
		}
		out, err := runHelm(t, "status", "aisched", "--kubeconfig", c.KubeconfigPath, "--namespace", systemNamespace)
		if err != nil || !strings.Contains(out, "STATUS: deployed") || !strings.Contains(out, "REVISION: 2") {
			t.Errorf("helm status: %v\n%s", err, out)
		}
	})

	t.Run("crds command", func(t *testing.T) {
		// The pre-upgrade hook's identity, as the chart renders it.
		var rbac []byte
		for _, obj := range decodeManifests(t, renderChart(t, "--show-only", "templates/crds-upgrade.yaml")) {
			if obj.GetKind() == "Job" {
				continue
			}
			data, err := yaml.Marshal(obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			rbac = append(append(rbac, "---\n"...), data...)
		}
		applyManifests(t, c, rbac, false)
		// An older release's CRD: another description.
		api := apiextensionsclient.NewForConfigOrDie(c.Config).ApiextensionsV1().CustomResourceDefinitions()
		const name = "gpuinventories.aisched.io"
		crd, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "an older release"
		if _, err := api.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		out, err := runCommand(t, "crds", "--kubeconfig", serviceAccountKubeconfig(t, c, systemNamespace, "aisched-crds"))
		if err != nil {
			t.Fatalf("aisched crds with the hook's permissions: %v\n%s", err, out)
		}
		crd, err = api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description; got != want {
			t.Errorf("after aisched crds: description %q, want this release's %q", got, want)
		}
	})
}

// waitWorkloads waits until the Deployments of systemNamespace have the
// given available replicas and the agent's DaemonSet runs on every node.
func waitWorkloads(t *testing.T, c *local.Cluster, deployments map[string]int32) {
	t.Helper()
	for name, replicas := range deployments {
		waitDeploymentAvailable(t, c.Client, systemNamespace, name, replicas)
	}
	localtest.Eventually(t, time.Minute, "the agent available on every node", func(ctx context.Context) (bool, error) {
		ds, err := c.Client.AppsV1().DaemonSets(systemNamespace).Get(ctx, "aisched-agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return daemonSetAvailable(ds), fmt.Errorf("status %+v", ds.Status)
	})
}

func daemonSetAvailable(ds *appsv1.DaemonSet) bool {
	s := ds.Status
	return s.ObservedGeneration == ds.Generation && s.DesiredNumberScheduled > 0 && s.NumberAvailable == s.DesiredNumberScheduled && s.UpdatedNumberScheduled == s.DesiredNumberScheduled
}
