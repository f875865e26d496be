package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMisplaced(t *testing.T) {
	a100 := Card{MemoryMiB: 40960, Cores: 6912}
	t4 := Card{MemoryMiB: 15360, Cores: 2560}
	tests := []struct {
		name             string
		memoryMiB, cores int64
		cards            []Card
		wantMisplaced    bool
	}{
		{name: "no requirement", cards: []Card{t4}, wantMisplaced: false},
		{name: "no cards", memoryMiB: 40960, cores: 6912, wantMisplaced: false},
		// 40960 >= 40960 and 6912 >= 6912 on both cards.
		{name: "exact fit", memoryMiB: 40960, cores: 6912, cards: []Card{a100, a100}, wantMisplaced: false},
		// The second card has 40959 < 40960 MiB.
		{name: "one card one MiB short", memoryMiB: 40960, cards: []Card{a100, {MemoryMiB: 40959, Cores: 6912}}, wantMisplaced: true},
		// 15360 < 32768 MiB on the T4.
		{name: "memory short", memoryMiB: 32768, cards: []Card{a100, t4}, wantMisplaced: true},
		// 2560 < 5000 cores on the T4; its memory is enough.
		{name: "cores short", memoryMiB: 8192, cores: 5000, cards: []Card{t4}, wantMisplaced: true},
		// Unknown cores (0) fail a core requirement, as in gpu.Card.Satisfies.
		{name: "unknown cores under a core requirement", cores: 1, cards: []Card{{MemoryMiB: 40960}}, wantMisplaced: true},
		{name: "unknown cores without a core requirement", memoryMiB: 16384, cards: []Card{{MemoryMiB: 40960}}, wantMisplaced: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Misplaced(tc.memoryMiB, tc.cores, tc.cards)
			if diff := cmp.Diff(tc.wantMisplaced, got); diff != "" {
				t.Errorf("Misplaced (-want,+got):\n%s", diff)
			}
		})
	}
}
