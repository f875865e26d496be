package deliver

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"

	"github.com/aisched/aisched/pkg/agent/nvidiasmi"
)

// probeScript allocates argv[1] MiB on the one card it sees and, with
// argv[2] == "speed", measures bf16 matrix products; it prints one
// "key=value" line per result.
const probeScript = `
import sys, time, torch
mib = int(sys.argv[1])
try:
    x = torch.empty(mib * 2**20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    print("alloc=ok")
    del x
except torch.OutOfMemoryError:
    print("alloc=oom")
if sys.argv[2] == "speed":
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    n, t = 20, time.perf_counter()
    for _ in range(n):
        a @ a
    torch.cuda.synchronize()
    print("tflops=%.1f" % (n * 2 * 8192**3 / (time.perf_counter() - t) / 1e12))
`

// TestRealMPSShare starts NVIDIA's MPS control daemon on the node's card 0
// and runs a CUDA program (PyTorch) with the environment the hook's MPS
// layer gives a container holding a quarter of the card and 4 GiB of its
// memory, beside the same program with the card whole. The share must
// hold: 1 GiB fits, 6 GiB does not (and does without the share), and the
// program's matrix products run at most half as fast. It runs only where
// AISCHED_REAL_GPU=1 and MPS and a Python with PyTorch
// (AISCHED_REAL_GPU_PYTHON, python3 by default) are on the node.
func TestRealMPSShare(t *testing.T) {
	if os.Getenv("AISCHED_REAL_GPU") != "1" {
		t.Skip("set AISCHED_REAL_GPU=1 on a node with NVIDIA GPUs (make gpu-check)")
	}
	control, err := exec.LookPath("nvidia-cuda-mps-control")
	if err != nil {
		t.Skipf("no MPS on this node: %v", err)
	}
	python := os.Getenv("AISCHED_REAL_GPU_PYTHON")
	if python == "" {
		python = "python3"
	}
	cards, err := nvidiasmi.Runner{}.Cards(context.Background())
	if err != nil {
		t.Fatalf("reading the cards: %v", err)
	}
	dir := t.TempDir()
	pipes, logs := filepath.Join(dir, "pipe"), filepath.Join(dir, "log")
	for _, d := range []string{pipes, logs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	daemonEnv := append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+pipes, "CUDA_MPS_LOG_DIRECTORY="+logs,
		"CUDA_VISIBLE_DEVICES="+cards[0].UUID)
	start := exec.Command(control, "-d")
	start.Env = daemonEnv
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("starting the MPS control daemon: %v: %s", err, out)
	}
	t.Cleanup(func() {
		quit := exec.Command(control)
		quit.Env = daemonEnv
		quit.Stdin = strings.NewReader("quit\n")
		if out, err := quit.CombinedOutput(); err != nil {
			t.Errorf("stopping the MPS control daemon: %v: %s", err, out)
		}
	})

	envOf := func(share *Share) []string {
		adj := &api.ContainerAdjustment{}
		layer := Layer{Isolation: IsolationMPS, Naming: NamingEnv, MPSPipeDirectory: pipes}
		if w := layer.Adjust(Delivery{UUIDs: []string{cards[0].UUID}, Share: share}, adj); w != "" {
			t.Fatalf("MPS layer warned: %s", w)
		}
		env := append(os.Environ(), "CUDA_VISIBLE_DEVICES="+cards[0].UUID)
		if share == nil {
			// A whole card through the same daemon: the layer sets no MPS
			// variables for it, so name the pipes as a share would.
			env = append(env, "CUDA_MPS_PIPE_DIRECTORY="+pipes)
		}
		for _, kv := range adj.GetEnv() {
			env = append(env, kv.Key+"="+kv.Value)
		}
		return env
	}
	probe := func(env []string, mib int, mode string) map[string]string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, "-c", probeScript, strconv.Itoa(mib), mode)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("probe %d MiB %s: %v: %s", mib, mode, err, stderr.String())
		}
		res := map[string]string{}
		for _, line := range strings.Fields(string(out)) {
			if k, v, ok := strings.Cut(line, "="); ok {
				res[k] = v
			}
		}
		return res
	}
	share := &Share{Milli: 250, MemMiB: 4096}
	shared, whole := envOf(share), envOf(nil)

	small := probe(shared, 1024, "speed")
	big := probe(shared, 6144, "alloc")
	full := probe(whole, 6144, "speed")
	t.Logf("share %s: 1 GiB %s, 6 GiB %s, %s TFLOP/s; whole card: 6 GiB %s, %s TFLOP/s",
		formatShare(*share), small["alloc"], big["alloc"], small["tflops"], full["alloc"], full["tflops"])
	if small["alloc"] != "ok" {
		t.Errorf("1 GiB within a 4 GiB share: %q, want ok", small["alloc"])
	}
	if big["alloc"] != "oom" {
		t.Errorf("6 GiB beyond a 4 GiB share: %q, want oom", big["alloc"])
	}
	if full["alloc"] != "ok" {
		t.Errorf("6 GiB on the whole card: %q, want ok", full["alloc"])
	}
	sharedSpeed, err1 := strconv.ParseFloat(small["tflops"], 64)
	fullSpeed, err2 := strconv.ParseFloat(full["tflops"], 64)
	if err1 != nil || err2 != nil || fullSpeed <= 0 {
		t.Fatalf("throughput not measured: share %q, whole %q", small["tflops"], full["tflops"])
	}
	ratio := sharedSpeed / fullSpeed
	t.Logf("a quarter of the card ran at %.2f of the whole card's speed", ratio)
	if ratio > 0.5 {
		t.Errorf("a quarter of the card ran at %.2f of the whole card's speed: want at most 0.5", ratio)
	}
}
