package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// CapacityMilli returns the GPU capacity of nodes in thousandths of a card:
// the sum of their cards times 1000.
func CapacityMilli(nodes []Node) int64 {
	var sum int64
	for _, n := range nodes {
		sum += int64(n.GPUs) * wholeCard
	}
	return sum
}

// MaxInflate bounds inflate: the sequence holds about inflate times the
// trace's pods, and more than ten times the cluster's GPU capacity
// measures nothing the paper's range (0.8 to 1.3) does not.
const MaxInflate = 10

// CheckInflate says why inflate cannot build a sequence: it must be a
// number from 1 (the sequence must reach the cluster's capacity, where
// the protocol reads its result) to MaxInflate.
func CheckInflate(inflate float64) error {
	if !(inflate >= 1 && inflate <= MaxInflate) {
		return fmt.Errorf("%g: want a number from 1 to %d", inflate, MaxInflate)
	}
	return nil
}

// Workload builds the arrival sequence of the FGD protocol. It shuffles a
// copy of pods, then appends pods drawn uniformly at random, with
// replacement, from pods (in the order given) until the summed TotalGPUMilli
// of the sequence reaches inflate*capacityMilli, rounded to the nearest
// milli; the pod that reaches it is the last. The k-th drawn copy (k = 1, 2,
// ...) is named "<original name>-dup-<k>"; that is unique as long as no
// original name has that form. The pods of the sequence share their GPUSpec
// slices with pods.
//
// The randomness is exactly one generator, rand.New(rand.NewPCG(uint64(seed),
// 0)) of math/rand/v2: first its Shuffle over the whole copy, then one
// IntN(len(pods)) per drawn pod. The same seed gives the same sequence on
// every platform; PCG is a specified algorithm, and TestWorkloadPinned fails
// should a Go release change how Shuffle or IntN use it.
//
// No copies are drawn when the shuffled pods reach the target already, when
// no pod asks for a GPU, or when inflate is not a finite number; the result
// is then the shuffled list alone.
func Workload(pods []Pod, seed int64, inflate float64, capacityMilli int64) []Pod {
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	seq := slices.Clone(pods)
	rng.Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })

	var sum int64
	for _, p := range seq {
		sum += p.TotalGPUMilli()
	}
	target := math.Round(inflate * float64(capacityMilli))
	// With sum > 0 a draw adds sum/len(pods) on average, so the loop ends.
	if sum <= 0 || math.IsInf(target, 0) || math.IsNaN(target) {
		return seq
	}
	for k := 1; float64(sum) < target; k++ {
		p := pods[rng.IntN(len(pods))]
		p.Name = fmt.Sprintf("%s-dup-%d", p.Name, k)
		seq = append(seq, p)
		sum += p.TotalGPUMilli()
	}
	return seq
}
