// Package percentile is aisched's one percentile: the nearest rank, in per
// mille so that p99.9 is exact.
package percentile

import "cmp"

// NearestRank returns the perMille-th per mille (500 the median, 990 the
// 99th percentile, 999 the 99.9th) of sorted, which is increasing: the
// value of rank ceil(n*perMille/1000), at least 1, the smallest value that
// at least perMille/1000 of the values do not exceed. It always reports a
// value that was observed, where linear interpolation would invent one
// between two. The rank is computed in integers, exact for every n, where
// a float product can land just above a whole number (0.07*100 =
// 7.000000000000001) and ceil would skip a rank. It returns the zero value
// for no values.
func NearestRank[T cmp.Ordered](sorted []T, perMille int) T {
	n := len(sorted)
	if n == 0 {
		var zero T
		return zero
	}
	rank := (n*perMille + 999) / 1000
	return sorted[min(max(rank, 1), n)-1]
}
