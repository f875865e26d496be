package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagValidation runs each subcommand with a flag it must refuse and
// checks that it refuses it before it starts anything, with an error that
// names the flag and says what it wants.
func TestFlagValidation(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	file := testFiles(t)
	configMap := file("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
	noKind := file("nokind.yaml", "profiles: []\n")
	badYAML := file("bad.yaml", "kind: KubeSchedulerConfiguration\nprofiles: [\n")
	badCluster := file("cluster.yaml", "apiVersion: aisched.io/v1alpha1\nkind: Cluster\nnodePools:\n  - {name: a, count: many, cpu: \"1\", memory: 1Gi}\n")
	kubeconfig := file("kubeconfig", "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n"+
		"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: t}}]\n")
	ca := file("ca.crt", "")
	emptyDir := t.TempDir()
	badJob := file("job.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n  nodeSelectr: {}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--port", "70000"}, "--port 70000: want 0 (any free port) to 65535"},
		{[]string{"up", "--cluster", badCluster}, badCluster + ":4:"},
		{[]string{"up", "--scheduler-config", badYAML}, badYAML + ":"},
		{[]string{"agent"}, "--node-name is required"},
		{[]string{"agent", "--node-name", "n", "--interval", "0s"}, "--interval 0s: must be positive"},
		{[]string{"agent", "--node-name", "n", "--interval", "10s", "--window", "20s"}, "--window 20s: longer than --interval 10s"},
		{[]string{"agent", "--node-name", "n", "--gpu-delivery", "magic"}, `--gpu-delivery "magic": want`},
		{[]string{"agent", "--node-name", "n", "--window", "-1s"}, "--window -1s: must not be negative"},
		{[]string{"agent", "--node-name", "n", "--root", "/nonexistent"}, "--root: stat /nonexistent"},
		{[]string{"agent", "--node-name", "n", "--metrics-bind-address", "nohost"}, "--metrics-bind-address: address nohost: missing port"},
		{[]string{"agent", "--node-name", "n", "--gpu-delivery", "nri", "--once"}, "--gpu-delivery=nri serves the runtime: it cannot go with --once"},
		{[]string{"agent", "--node-name", "n", "--gpu-delivery", "nri", "--gpu-isolation", "magic"}, "--gpu-device-naming, --gpu-isolation: "},
		{[]string{"bench", "throughput", "--rows", "1"}, "--rows: give --suite too"},
		{[]string{"bench", "throughput", "--suite", "--rows", "1,99"}, `--rows "1,99": want numbers from 1 to`},
		{[]string{"bench", "throughput", "--format", "table"}, "--format table: give --suite (one run's JSON has no table)"},
		{[]string{"bench", "throughput", "--format", "xml"}, `--format "xml": want json or table`},
		{[]string{"bench", "gateway", "--duration", "0s"}, "--duration 0s: want a positive duration"},
		{[]string{"bench", "gateway", "--warmup", "-1s"}, "--warmup -1s: negative"},
		{[]string{"bench", "gateway", "--idle", "-1s"}, "--idle -1s: negative"},
		{[]string{"console", "--simulations=false", "--apiserver", "https://127.0.0.1:1", "--apiserver-ca-file", ca, "--bind-address", "127.0.0.1:0",
			"--tls-cert-file", filepath.Join(emptyDir, "c.pem"), "--tls-private-key-file", filepath.Join(emptyDir, "k.pem")}, "--tls-cert-file: "},
		{[]string{"console", "--simulations=false", "--apiserver", "http://127.0.0.1:1"}, `--apiserver "http://127.0.0.1:1": want https://host[:port]`},
		{[]string{"controller", "--assign-scheduler", "--webhook-port", "0"}, "--assign-scheduler: needs the webhook (--webhook-port)"},
		{[]string{"controller", "--kubeconfig", kubeconfig, "--webhook-cert-dir", emptyDir}, "--webhook-cert-dir: "},
		{[]string{"sim", "run", filepath.Join(emptyDir, "gone.yaml")}, "scenario: stat " + filepath.Join(emptyDir, "gone.yaml")},
		{[]string{"sim", "run", emptyDir}, emptyDir + ": no scenario files (*.yaml)"},
		{[]string{"sim", "trace", "--nodes", "n.csv", "--pods", "p.csv", "--policy", "aisched", "--seeds", "9-1"}, `--seeds "9-1": want whole numbers and ranges`},
		{[]string{"sim", "trace", "--nodes", "n.csv", "--pods", "p.csv", "--policy", "aisched", "--seeds", "1-2000"}, "(at most 1000 seeds)"},
		{[]string{"sim", "trace", "--nodes", "n.csv", "--pods", "p.csv"}, "--policy: name at least one scheduler profile"},
		{[]string{"sim", "trace", "--nodes", "n.csv", "--pods", "p.csv", "--policy", "aisched", "--inflate", "0"}, "--inflate "},
		{[]string{"version", "-o", "yaml"}, `--output "yaml": want json or nothing`},
		{[]string{"bench", "throughput", "--rack-nodes", "-1"}, "--rack-nodes -1: want 0 (no racks) to --nodes 5000"},
		{[]string{"bench", "throughput", "--nodes", "100", "--rack-nodes", "101"}, "--rack-nodes 101: want 0 (no racks) to --nodes 100"},
		{[]string{"bench", "gateway", "--rates", "fast"}, "--rates"},
		{[]string{"bench", "gateway", "--connections", "0"}, "--connections 0: want at least 1"},
		{[]string{"bench", "gateway", "--format", "xml"}, `--format "xml": want json or table`},
		{[]string{"bench", "throughput", "--dra"}, "--dra publishes the cards of GPU nodes through NVIDIA's DRA driver: give --gpu too"},
		{[]string{"bench", "throughput", "--gpu", "--dra", "--fill", "0.5"}, "--fill 0.5 with --dra"},
		{[]string{"console", "--session-ttl", "0s"}, "--session-ttl 0s: want more than 0 and at most 168h"},
		{[]string{"console", "--whatif-horizon", "9000h"}, "--whatif-horizon 9000h0m0s: want more than 0 and at most 8760h"},
		{[]string{"console", "--tls-cert-file", "c.pem"}, "--tls-cert-file and --tls-private-key-file go together"},
		{[]string{"controller", "--webhook-port", "70000"}, "--webhook-port 70000: not a port"},
		{[]string{"demo-model", "--fail-percent", "101"}, "--fail-percent 101: not a percentage"},
		{[]string{"demo-model", "--delay", "-1s"}, "--delay -1s: negative"},
		{[]string{"gateway", "--trusted-proxies", "nowhere"}, `--trusted-proxies: "nowhere" is not a CIDR`},
		{[]string{"scheduler", "--config", configMap}, "a ConfigMap (as helm template prints the chart's)"},
		{[]string{"scheduler", "--config", noKind}, "no kind: want a KubeSchedulerConfiguration"},
		{[]string{"scheduler", "--config", badYAML}, "--config: " + badYAML + ":"},
		{[]string{"sim", "run", "--format", "xml", "x.yaml"}, `--format "xml": want table or json`},
		{[]string{"sim", "run", "--engine", "warp", "x.yaml"}, `--engine "warp": want fast or apiserver`},
		{[]string{"sim", "run", "--parallel", "1000", "x.yaml"}, "--parallel 1000: want 1 to"},
		{[]string{"sim", "run", "--compare", "aisched", "x.yaml"}, `--compare "aisched": want two policies, base,candidate`},
		{[]string{"whatif", "-f", badJob, "--format", "xml"}, `--format "xml": want text or json`},
		{[]string{"whatif", "-f", badJob, "--horizon", "0s"}, "--horizon 0s: want more than 0 and at most 8760h"},
		{[]string{"whatif", "-f", badJob}, badJob + `:6: unknown field "spec.nodeSelectr"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := NewCommand()
			cmd.SetArgs(tc.args)
			cmd.SetOut(&strings.Builder{})
			cmd.SetErr(&strings.Builder{})
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestSharedConfigFlag gives each command that reads the shared
// configuration a file with a bad value, under the flag's name and under
// its deprecated old name: both reach the file (the error is the file's,
// at its line, named as --shared-config), and only the old name prints
// that it is deprecated.
func TestSharedConfigFlag(t *testing.T) {
	file := testFiles(t)
	bad := file("shared.yaml", "apiVersion: config.aisched.io/v1alpha1\nkind: SharedConfiguration\njobQueue:\n  backoffSeconds: 0\n")
	job := file("job.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i}]\n")
	wantErr := "--shared-config: " + bad + ":4: jobQueue.backoffSeconds: Invalid value: 0"
	const deprecation = "Flag --services-config has been deprecated, use --shared-config"
	for _, args := range [][]string{{"scheduler"}, {"whatif", "-f", job}, {"console"}} {
		for _, flag := range []string{"--shared-config", "--services-config"} {
			t.Run(args[0]+" "+flag, func(t *testing.T) {
				cmd := NewCommand()
				cmd.SetArgs(append(append([]string{}, args...), flag, bad))
				// Cobra prints pflag's notices to the command's output,
				// stderr unless set.
				var output strings.Builder
				cmd.SetOut(&output)
				cmd.SetErr(&output)
				err := cmd.Execute()
				if err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Errorf("error %v, want one containing %q", err, wantErr)
				}
				if got, want := strings.Contains(output.String(), deprecation), flag == "--services-config"; got != want {
					t.Errorf("output %q: deprecation notice %t, want %t", output.String(), got, want)
				}
			})
		}
	}
}

// testFiles returns a function that writes a file of the given name and
// content in a directory of the test's, and returns its path.
func testFiles(t *testing.T) func(name, content string) string {
	dir := t.TempDir()
	return func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}
