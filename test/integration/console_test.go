package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aischedconfig "github.com/aisched/aisched/apis/config"
	platformv1alpha1 "github.com/aisched/aisched/apis/platform/v1alpha1"
	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/console"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
	"github.com/aisched/aisched/pkg/whatif"
)

// chromium finds a Chromium or Chrome to drive: $AISCHED_CHROMIUM, else
// one on PATH. .ci/run installs Debian's chromium; without one the browser
// tests skip, except where AISCHED_REQUIRE_CHROMIUM is set (CI).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("AISCHED_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("AISCHED_REQUIRE_CHROMIUM") != "" {
		t.Fatal("no Chromium on PATH, and AISCHED_REQUIRE_CHROMIUM is set (CI)")
	}
	t.Skip("no Chromium on PATH (apt-get install chromium, or set AISCHED_CHROMIUM)")
	return ""
}

// browser starts a headless browser of its own (own profile, own cookies)
// 1280 px wide, and returns its context.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.WindowSize(1280, 900), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// run runs browser actions with a deadline, failing the test with what
// was being done.
func run(t *testing.T, ctx context.Context, what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		status, _ := chromedp.Run(sctx, chromedp.TextContent(chromedp.CSS("#status")))
		text, _ := chromedp.Run(sctx, chromedp.TextContent(chromedp.CSS("#page")))
		t.Fatalf("%s: %v\nstatus line: %q\npage: %.2000s", what, err, status, text)
	}
}

// textContains waits until the element sel's text contains each of want.
func textContains(sel string, want ...string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; const t = e.textContent; return %s; })()`,
		sel, jsAll(want)), chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(0))
}

func jsAll(want []string) string {
	var parts []string
	for _, w := range want {
		parts = append(parts, fmt.Sprintf("t.includes(%q)", w))
	}
	if len(parts) == 0 {
		return "true"
	}
	return strings.Join(parts, " && ")
}

// set types values into the inputs named by id.
func set(values map[string]string) chromedp.Action[chromedp.Void] {
	var steps []chromedp.Action[chromedp.Void]
	for id, v := range values {
		steps = append(steps, setValue("#"+id, v))
	}
	return chromedp.Steps(steps...)
}

// click clicks the element sel once it is there. The query and the click
// are one evaluation in the page: the pages redraw their tables as the
// cluster changes, and a node found by one protocol call can be gone by
// the next.
func click(sel string) chromedp.Action[chromedp.Void] {
	return inPage(sel, "e.click()")
}

// visible waits until the element sel is there and shown, as click.
func visible(sel string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(sel)
	return chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.offsetParent !== null; })()`, q),
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(0))
}

// setValue sets the value of the element sel once it is there, as click.
func setValue(sel, value string) chromedp.Action[chromedp.Void] {
	v, _ := json.Marshal(value)
	return inPage(sel, "e.value = "+string(v))
}

// inPage runs do on the element sel (as e) once it is there, in one
// evaluation.
func inPage(sel, do string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(sel)
	return chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return false; %s; return true; })()`, q, do),
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(0))
}

// screenshot saves the page as dir/name.png when
// AISCHED_CONSOLE_SCREENSHOTS names a directory (make console-screenshots).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("AISCHED_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsole drives the console of a local cluster in headless Chromium:
// the admin signs in with aisched up's token, sees the cards a pod holds
// and why a gang waits, creates an Operator, an instance and a service
// through the forms and gets the model's answer through the gateway, and
// runs a scenario; a user without rights sees the apiserver's refusal.
func TestConsole(t *testing.T) {
	chrome := chromium(t)
	sched, err := scheduler.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Options{
		Platform: &local.PlatformOptions{},
		Console: &local.ConsoleOptions{Handler: console.ForCluster(console.Options{
			Simulations: &console.Simulations{SchedulerConfig: sched, SharedConfig: aischedconfig.DefaultShared(), WhatIfHorizon: whatif.DefaultHorizon},
		})},
	})
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	ai := versioned.NewForConfigOrDie(c.Config)
	page := browser(t, chrome)
	run(t, page, "sign in with the printed URL", time.Minute,
		chromedp.Navigate(c.ConsoleURL()+"#token="+c.AdminToken),
		visible("#nav"),
		textContains("#who", "aisched-admin"))
	url, err := chromedp.Run(page, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(url, c.AdminToken) {
		t.Errorf("the token stays in the address bar: %s", url)
	}

	t.Run("GPU map", func(t *testing.T) {
		// Grouped by the pools' instance types (a topology of one level):
		// a domain opens into its nodes, a node into its cards.
		createTopology(t, c, "pools", instanceTypeLabel)
		// The page is open before the pod exists: what it shows next comes
		// through the console's event stream, without a reload.
		run(t, page, "open the GPU map", 10*time.Second, chromedp.Navigate(c.ConsoleURL()+"#/gpus"),
			visible(`[data-domain="a100-8x"]`), textContains("#page", "aischedtopology pools"))
		if cards := document(t, page, `document.querySelectorAll("[data-card]").length`); cards != "0" {
			t.Errorf("%s cards drawn before any is asked for", cards)
		}
		pod := utiltesting.MakePod("holder", ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "1").GPU(2).Obj()
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var bound *corev1.Pod
		localtest.Eventually(t, time.Minute, "pod holder bound", func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "holder", metav1.GetOptions{})
			bound = p
			return err == nil && p.Spec.NodeName != "" && p.Annotations[gpu.AssignedAnnotation] != "", err
		})
		cards, ok := gpu.ParseIndices(bound.Annotations[gpu.AssignedAnnotation])
		if !ok || len(cards) != 2 {
			t.Fatalf("assigned %q", bound.Annotations[gpu.AssignedAnnotation])
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, bound.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		domain := fmt.Sprintf(`[data-domain=%q]`, node.Labels[instanceTypeLabel])
		nodeRow := fmt.Sprintf(`[data-node=%q]`, node.Name)
		run(t, page, "the domain counts the two cards held", 30*time.Second,
			textContains(domain+" > summary", "2 whole"), textContains("#whole-cards", "2"))
		run(t, page, "open the domain, then the node", 30*time.Second,
			click(domain+" > summary"), visible(nodeRow), click(nodeRow+" > summary"))
		for _, i := range cards {
			sel := fmt.Sprintf(`[data-card="%s/%d"]`, bound.Spec.NodeName, i)
			run(t, page, "card "+sel+" shows its holder", 30*time.Second, textContains(sel, ns+"/holder", "held whole"))
		}
		if summary := document(t, page, `document.querySelector("#gpu-summary").textContent + "|" + document.querySelector("#page").textContent`); strings.Contains(summary, "null") || strings.Contains(summary, "undefined") {
			t.Errorf("the page shows a stray null or undefined: %.600s", summary)
		}
		screenshot(t, page, "gpus")

		// The holder filter, applied by the server: one domain, one node,
		// the two cards; what was open stays open.
		run(t, page, "filter by holder", 30*time.Second,
			setValue("#gpu-holder", ns+"/holder"), click("#gpu-apply"),
			textContains("#free-cards", "0"), textContains("#whole-cards", "2"),
			visible(fmt.Sprintf(`[data-card="%s/%d"]`, bound.Spec.NodeName, cards[0])))
		if n := document(t, page, `document.querySelectorAll("#gpu-map details.domain").length + "/" + document.querySelectorAll("[data-card]").length`); n != "1/2" {
			t.Errorf("filtered by holder: %s domains/cards shown, want 1/2", n)
		}
		run(t, page, "clear the filter", 30*time.Second, click("#gpu-clear"), visible(`[data-domain="t4-4x"]`))
	})

	t.Run("a gang that cannot fit", func(t *testing.T) {
		for i := range 3 {
			p := utiltesting.MakePod(fmt.Sprintf("big-%d", i), ns).SchedulerName(scheduler.AischedProfile).
				Req(corev1.ResourceCPU, "1").GPU(16).Label(podgroup.NameLabel, "big").Label(podgroup.MinAvailableLabel, "3").Obj()
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pg := waitPodGroup(t, c, ns, "big", "says why it waits", func(pg *schedulingv1alpha1.PodGroup) bool {
			cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted)
			return cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != ""
		})
		cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted)
		row := fmt.Sprintf(`tr[data-group="%s/big"]`, ns)
		// By keyboard: the navigation link takes focus and Enter follows it.
		run(t, page, "the queue shows the group's reason", 30*time.Second,
			chromedp.Focus(chromedp.CSS(`#nav a[data-page="queue"]`)),
			chromedp.SendKeys(chromedp.CSS(`#nav a[data-page="queue"]`), kb.Enter),
			textContains("#nav a[aria-current=page]", "Waiting work"),
			textContains(row+" td.reason", cond.Reason),
			textContains(row+" td.message", firstWords(cond.Message, 6)))
		screenshot(t, page, "queue")
	})

	t.Run("platform forms", func(t *testing.T) {
		run(t, page, "create the operator", time.Minute,
			chromedp.Navigate(c.ConsoleURL()+"#/platform"),
			click("#new-operators"),
			visible("#form-operators"),
			set(map[string]string{
				"op-namespace": ns, "op-name": "sum", "op-displayName": "Sum of the inputs",
				"op-c0-name": "model", "op-c0-image": "ghcr.io/aisched/demo-model:v1", "op-c0-gpus": "1",
				"op-c0-port": "8080", "op-c0-cpu": "500m", "op-c0-memory": "1Gi", "op-c0-ready": "/v2/health/ready",
				"op-c0-env": "MODEL_NAME=sum",
			}),
			click("#form-operators button[type=submit]"),
			textContains("#status", "Saved "+ns+"/sum"),
			textContains(fmt.Sprintf(`tr[data-object="operators/%s/sum"]`, ns), "ghcr.io/aisched/demo-model:v1"))
		run(t, page, "create the instance", time.Minute,
			click("#new-instances"),
			visible("#form-instances"),
			set(map[string]string{"inst-namespace": ns, "inst-name": "sum", "inst-operator": "sum", "inst-replicas": "1"}),
			click("#form-instances button[type=submit]"),
			textContains("#status", "Saved "+ns+"/sum"))
		run(t, page, "create the service", time.Minute,
			click("#new-services"),
			visible("#form-services"),
			set(map[string]string{"svc-namespace": ns, "svc-name": "sum", "svc-instance": "sum", "svc-port": "8080",
				"svc-auth": "APIKey", "svc-secret": "sum-keys", "svc-qps": "50", "svc-burst": "100"}),
			click("#form-services button[type=submit]"),
			textContains("#status", "Saved "+ns+"/sum"))
		svcRow := fmt.Sprintf(`tr[data-object="services/%s/sum"]`, ns)
		run(t, page, "write the API key", time.Minute,
			click(svcRow+" button:nth-of-type(2)"),
			visible("#form-keys"),
			set(map[string]string{"keys-lines": "console-user=console-key-0123456789"}),
			click("#form-keys button[type=submit]"),
			textContains("#status", "console-user", "sum-keys"))

		svc, err := ai.PlatformV1alpha1().AIServices(ns).Get(ctx, "sum", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.RateLimit == nil || *svc.Spec.RateLimit.QPS != 50 || svc.Spec.Auth.SecretRef.Name != "sum-keys" {
			t.Errorf("the service the form wrote: %+v", svc.Spec)
		}
		localtest.Eventually(t, 2*time.Minute, "service sum ready", func(ctx context.Context) (bool, error) {
			s, err := ai.PlatformV1alpha1().AIServices(ns).Get(ctx, "sum", metav1.GetOptions{})
			return err == nil && meta.IsStatusConditionTrue(s.Status.Conditions, platformv1alpha1.ConditionReady), err
		})
		run(t, page, "send a request through the gateway", time.Minute,
			chromedp.Navigate(c.ConsoleURL()+"#/platform"),
			click(svcRow+" button:nth-of-type(3)"),
			visible("#form-try"),
			set(map[string]string{"try-key": "console-key-0123456789", "try-path": "/v2/models/sum/infer"}),
			click("#form-try button[type=submit]"),
			textContains("#try-answer", "200 in", `"data":[10]`))
		screenshot(t, page, "platform")

		run(t, page, "take the instance offline", time.Minute,
			chromedp.Navigate(c.ConsoleURL()+"#/platform"),
			click(fmt.Sprintf(`tr[data-object="instances/%s/sum"] button:nth-of-type(2)`, ns)),
			textContains("#status", "sum is Offline"))
		inst, err := ai.PlatformV1alpha1().OperatorInstances(ns).Get(ctx, "sum", metav1.GetOptions{})
		if err != nil || inst.Spec.State != platformv1alpha1.Offline {
			t.Errorf("instance after Take offline: %v, %v", inst.Spec.State, err)
		}
	})

	t.Run("simulations", func(t *testing.T) {
		run(t, page, "run a shipped scenario", 3*time.Minute,
			chromedp.Navigate(c.ConsoleURL()+"#/sim"),
			visible("#form-scenario"),
			// Chosen as a user chooses, with the events a choice fires: the
			// description follows it.
			inPage("#sim-scenario", `e.value = "gang-deadlock"; e.dispatchEvent(new Event("input", {bubbles: true}))`),
			textContains("#sim-desc", "Two 4-pod gangs"),
			click("#form-scenario button[type=submit]"),
			// The results are a table, each metric with its direction and meaning.
			textContains("#sim-results", "partial_groups", "lower", "gangs that had some but fewer than min-available members bound"),
			visible("#sim-report img.plot"))
		screenshot(t, page, "sim")
		job := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: trial, namespace: %s}
spec:
  schedulerName: aisched
  containers:
    - name: c
      image: x
      resources: {limits: {nvidia.com/gpu: "1"}}
`, ns)
		run(t, page, "ask whatif for a pasted pod", 2*time.Minute,
			setValue("#wi-namespace", ns),
			setValue("#wi-manifest", job),
			click("#form-whatif button[type=submit]"),
			textContains("#sim-report", "The job fits now.", "trial on gpu-"))
	})

	t.Run("a user without rights", func(t *testing.T) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}
		if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Rights to read operators in ns alone, to tell a refusal from a
		// console that shows nothing to anyone.
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "operators-reader"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{platformv1alpha1.GroupName}, Resources: []string{"operators"}, Verbs: []string{"get", "list", "watch"}}}}
		if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "nobody"}}}
		if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		token := serviceAccountToken(t, c, ns, "nobody", nil)
		other := browser(t, chrome)
		user := "system:serviceaccount:" + ns + ":nobody"
		run(t, other, "sign in with the form", time.Minute,
			chromedp.Navigate(c.ConsoleURL()),
			visible("#signin"),
			setValue("#token", token),
			click("#signin button[type=submit]"),
			textContains("#who", user))
		run(t, other, "the GPU map is refused", 30*time.Second,
			chromedp.Navigate(c.ConsoleURL()+"#/gpus"),
			textContains("#page .refusal", "Refused by the cluster", "forbidden", user))
		run(t, other, "creating an operator is refused", time.Minute,
			chromedp.Navigate(c.ConsoleURL()+"#/platform"),
			// All namespaces are refused; the one the user may read is shown.
			textContains("#page .refusal", "forbidden"),
			setValue("#ns-filter", ns),
			click("#ns-apply"),
			textContains(fmt.Sprintf(`tr[data-object="operators/%s/sum"]`, ns), "Sum of the inputs"),
			click("#new-operators"),
			visible("#form-operators"),
			set(map[string]string{"op-namespace": ns, "op-name": "sneaky", "op-displayName": "x", "op-c0-name": "m", "op-c0-image": "x:1"}),
			click("#form-operators button[type=submit]"),
			textContains("#status", "forbidden", "cannot create"))
		if _, err := ai.PlatformV1alpha1().Operators(ns).Get(ctx, "sneaky", metav1.GetOptions{}); err == nil {
			t.Error("the refused operator exists")
		}
	})
}

// instanceTypeLabel is the label aisched up's built-in cluster gives each
// pool's nodes: a100-8x, t4-4x, cpu-32c-128g.
const instanceTypeLabel = "node.kubernetes.io/instance-type"

// document evaluates a JavaScript expression in the page and returns its
// value as text.
func document(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := chromedp.Run(tctx, chromedp.Evaluate[string]("String("+expr+")"))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return out
}

// firstWords is the first n words of s, for matching a message that the
// page may wrap.
func firstWords(s string, n int) string {
	w := strings.Fields(s)
	return strings.Join(w[:min(n, len(w))], " ")
}
