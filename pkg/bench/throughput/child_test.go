package throughput

import (
	"context"
	"strings"
	"testing"
)

// InChild runs the command with the case (and the profile prefix) added
// and reads its result; a failing or garbled child is an error.
func TestInChild(t *testing.T) {
	// The script prints its arguments back as the case's name.
	echo := InChild("sh", "-c", `printf '{"name":"%s %s","pods_per_second":5,"scheduled":3}' "$1" "$2"`, "sh")
	r, err := echo(context.Background(), Options{ProfileTo: "/tmp/p"}, "aisched@4")
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "--measure-profile=aisched@4 --measure-profile-to=/tmp/p" || r.PodsPerSecond != 5 || r.Scheduled != 3 {
		t.Errorf("result %+v", r)
	}
	for name, script := range map[string]string{"exits 1": "exit 1", "prints no JSON": "echo hello"} {
		if _, err := InChild("sh", "-c", script)(context.Background(), Options{}, "x"); err == nil || !strings.Contains(err.Error(), "measurement process") {
			t.Errorf("a child that %s: %v, want an error naming the measurement process", name, err)
		}
	}
}
