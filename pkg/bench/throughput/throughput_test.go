package throughput

import (
	"context"
	"strings"
	"testing"
)

// Bad --fill values and pods that the cards left cannot hold are refused
// before any cluster starts.
func TestThroughputFillBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"above 0.9", Options{Fill: 0.95, GPU: true}, "--fill 0.95: want a share"},
		{"negative", Options{Fill: -0.1, GPU: true}, "--fill -0.1: want a share"},
		{"CPU pods", Options{Fill: 0.5}, "give --gpu or --shared"},
		// 1000 nodes with 7 of 8 cards held leave 1000 cards for 3000 pods.
		{"whole cards left too few", Options{Fill: 0.9, GPU: true, Pods: 3000}, "--pods 3000 need 3000 cards, and --nodes 1000 with --fill 0.9 leave 1000 free"},
		{"shares left too few", Options{Fill: 0.9, Shared: true, Pods: 4004}, "need 1001 cards"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Nodes, opts.Profiles = 1000, []string{"default-scheduler"}
			if opts.Pods == 0 {
				opts.Pods = 100
			}
			_, err := Run(context.Background(), opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Throughput: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := checkFill(Options{Nodes: 1000, Pods: 4000, Shared: true, Fill: 0.9}); err != nil {
		t.Errorf("4000 quarter shares on 1000 free cards: %v, want them accepted", err)
	}
}
