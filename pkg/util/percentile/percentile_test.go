package percentile

import (
	"testing"
	"time"
)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// durations returns 1ms, 2ms, ..., n ms.
func durations(n int) []time.Duration {
	d := make([]time.Duration, n)
	for i := range d {
		d[i] = ms(float64(i + 1))
	}
	return d
}

func TestNearestRank(t *testing.T) {
	cases := []struct {
		name     string
		sorted   []time.Duration
		perMille int
		want     time.Duration
	}{
		{name: "none", sorted: nil, perMille: 500, want: 0},
		{name: "one value is every percentile", sorted: durations(1), perMille: 999, want: ms(1)},
		// Nearest rank: ceil(10*500/1000) = 5th value, 5ms.
		{name: "median of 10", sorted: durations(10), perMille: 500, want: ms(5)},
		// ceil(10*900/1000) = 9th value, 9ms.
		{name: "p90 of 10", sorted: durations(10), perMille: 900, want: ms(9)},
		// ceil(10*990/1000) = ceil(9.9) = 10th value, 10ms.
		{name: "p99 of 10 is the max", sorted: durations(10), perMille: 990, want: ms(10)},
		// ceil(11*500/1000) = ceil(5.5) = 6th value, the middle one.
		{name: "median of 11", sorted: durations(11), perMille: 500, want: ms(6)},
		// ceil(1000*990/1000) = 990th value, 990ms.
		{name: "p99 of 1000", sorted: durations(1000), perMille: 990, want: ms(990)},
		// ceil(1000*999/1000) = 999th value: not the max, 1000ms.
		{name: "p99.9 of 1000", sorted: durations(1000), perMille: 999, want: ms(999)},
		// ceil(1001*999/1000) = ceil(999.999) = 1000th value.
		{name: "p99.9 of 1001", sorted: durations(1001), perMille: 999, want: ms(1000)},
		// ceil(200*990/1000) = 198th value.
		{name: "p99 of 200", sorted: durations(200), perMille: 990, want: ms(198)},
		// ceil(3*0/1000) = 0: the rank is at least 1, the min.
		{name: "p0 is the min", sorted: durations(3), perMille: 0, want: ms(1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NearestRank(tc.sorted, tc.perMille); got != tc.want {
				t.Errorf("NearestRank(%d values, %d‰) = %v, want %v", len(tc.sorted), tc.perMille, got, tc.want)
			}
		})
	}
}

func TestNearestRankFloats(t *testing.T) {
	// ceil(0.95*20) = 19th, where a float product would give 19.000000000000004.
	v := make([]float64, 20)
	for i := range v {
		v[i] = float64(i + 1)
	}
	if got := NearestRank(v, 950); got != 19 {
		t.Errorf("p95 of 1..20 = %v, want 19", got)
	}
}
