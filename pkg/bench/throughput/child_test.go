package throughput

import (
	"context"
	"strings"
	"testing"
)

// InChild runs the command with the options' cluster, the case (and the
// profile prefix) added and reads its result; a failing or garbled child
// is an error.
func TestInChild(t *testing.T) {
	// The script prints its arguments back as the case's name.
	echo := InChild("sh", "-c", `printf '{"name":"%s","pods_per_second":5,"scheduled":3}' "$*"`, "sh", "--timeout=1m")
	r, err := echo(context.Background(), Options{Nodes: 1000, Pods: 3200, GPU: true, Fill: 0.5, RackNodes: 16, ProfileTo: "/tmp/p"}, "aisched@4")
	if err != nil {
		t.Fatal(err)
	}
	want := "--timeout=1m --nodes=1000 --pods=3200 --gpu=true --shared=false --fill=0.5 --rack-nodes=16 --measure-profile=aisched@4 --measure-profile-to=/tmp/p"
	if r.Name != want || r.PodsPerSecond != 5 || r.Scheduled != 3 {
		t.Errorf("result %+v, want the name %q", r, want)
	}
	for name, script := range map[string]string{"exits 1": "exit 1", "prints no JSON": "echo hello"} {
		if _, err := InChild("sh", "-c", script)(context.Background(), Options{}, "x"); err == nil || !strings.Contains(err.Error(), "measurement process") {
			t.Errorf("a child that %s: %v, want an error naming the measurement process", name, err)
		}
	}
}
