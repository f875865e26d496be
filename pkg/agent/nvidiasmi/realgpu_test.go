package nvidiasmi

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aisched/aisched/pkg/gpu"
)

// The tests below read the node's real cards with the real nvidia-smi.
// They run only where AISCHED_REAL_GPU=1 (make gpu-check, on a GPU node);
// everywhere else the parser's tests above cover the formats.

func realGPU(t *testing.T) []Card {
	t.Helper()
	if os.Getenv("AISCHED_REAL_GPU") != "1" {
		t.Skip("set AISCHED_REAL_GPU=1 on a node with NVIDIA GPUs (make gpu-check)")
	}
	cards, err := Runner{}.Cards(context.Background())
	if err != nil {
		t.Fatalf("reading the cards: %v", err)
	}
	return cards
}

var uuidForm = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestRealInventory checks what the agent publishes for each real card
// against nvidia-smi -L, and that aisched knows the model's data sheet.
func TestRealInventory(t *testing.T) {
	cards := realGPU(t)
	out, err := exec.Command("nvidia-smi", "-L").Output()
	if err != nil {
		t.Fatalf("nvidia-smi -L: %v", err)
	}
	listed := strings.Count(string(out), "UUID: GPU-")
	if len(cards) != listed {
		t.Fatalf("read %d cards, nvidia-smi -L lists %d:\n%s", len(cards), listed, out)
	}
	for _, c := range cards {
		g := c.Inventory()
		t.Logf("card %d: %s %q memory %d MiB, compute capability %s, max SM clock %d MHz, %d CUDA cores, %d GB/s",
			g.Index, g.UUID, g.Model, g.MemoryMiB, g.ComputeCapability, g.MaxClockMHz, g.CUDACores, g.MemoryBandwidthGBps)
		if !uuidForm.MatchString(c.UUID) {
			t.Errorf("card %d: UUID %q is not of the form GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", c.Index, c.UUID)
		}
		if !strings.Contains(string(out), c.UUID) {
			t.Errorf("card %d: UUID %s not in nvidia-smi -L", c.Index, c.UUID)
		}
		if c.ComputeCapability == "" || c.MaxClockMHz == 0 || c.UtilizationPercent == nil {
			t.Errorf("card %d: compute capability %q, max clock %d, utilisation %v: a current driver reports all three",
				c.Index, c.ComputeCapability, c.MaxClockMHz, c.UtilizationPercent)
		}
		spec, ok := gpu.LookupModel(g.Model)
		if !ok {
			t.Errorf("card %d: model %q is not in pkg/gpu's table", c.Index, g.Model)
			continue
		}
		if got, err := strconv.ParseFloat(g.ComputeCapability, 64); err != nil || got != spec.ComputeCapability {
			t.Errorf("card %d: nvidia-smi says compute capability %q, pkg/gpu's table %.1f", c.Index, g.ComputeCapability, spec.ComputeCapability)
		}
	}
}

// TestRealLoad runs AISCHED_REAL_GPU_LOAD (a program that keeps card 0
// busy and holds memory for a while) and checks that what the agent reads
// shows it: utilisation up, memory used up, and back down after it exits.
// It reports how long one read of nvidia-smi takes, the agent's cost per
// sample.
func TestRealLoad(t *testing.T) {
	cards := realGPU(t)
	load := os.Getenv("AISCHED_REAL_GPU_LOAD")
	if load == "" {
		t.Skip("set AISCHED_REAL_GPU_LOAD to a command that loads card 0 for ~15 s")
	}
	idle := cards[0].MemoryUsedMiB
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", load)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var (
		peakUtil  int32
		peakMem   int64
		reads     []time.Duration
		loadErr   error
		running   = true
		tick      = time.NewTicker(500 * time.Millisecond)
		runner    = Runner{}
		readCards = func() []Card {
			start := time.Now()
			cs, err := runner.Cards(ctx)
			reads = append(reads, time.Since(start))
			if err != nil {
				t.Fatalf("reading the cards under load: %v", err)
			}
			return cs
		}
	)
	defer tick.Stop()
	for running {
		select {
		case loadErr = <-done:
			running = false
		case <-tick.C:
			c := readCards()[0]
			if c.UtilizationPercent != nil {
				peakUtil = max(peakUtil, *c.UtilizationPercent)
			}
			peakMem = max(peakMem, c.MemoryUsedMiB)
		}
	}
	if loadErr != nil {
		t.Fatalf("the load %q failed: %v", load, loadErr)
	}
	var after int64
	for range 20 {
		after = readCards()[0].MemoryUsedMiB
		if after <= idle+512 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	slices.Sort(reads)
	t.Logf("card 0: memory used %d MiB idle, peak %d MiB under load, %d MiB after; peak utilisation %d%%; %d reads of nvidia-smi, median %v, max %v",
		idle, peakMem, after, peakUtil, len(reads), reads[len(reads)/2], reads[len(reads)-1])
	if peakUtil < 50 {
		t.Errorf("peak utilisation %d%% under a load that keeps the card busy: want at least 50%%", peakUtil)
	}
	if peakMem < idle+4096 {
		t.Errorf("peak memory used %d MiB, idle %d MiB: the load holds at least 4 GiB", peakMem, idle)
	}
	if after > idle+512 {
		t.Errorf("memory used %d MiB after the load ended, idle was %d MiB", after, idle)
	}
}
