package jobqueue

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/aisched/aisched/pkg/queuetree"
)

// BenchmarkComputeQueues is one pass of the job queue with 100 team
// queues (10 departments of 10 teams, guaranteed and weighted) over 1,000
// nodes of 8 cards, half of them held by running work of the queues, and
// 10,000 waiting groups of 1 to 4 single-card pods spread over the
// queues. The pass admits what fits (the 4,000 free cards) and orders the
// rest; ns/op is the time of a pass after the first (the queue remembers
// the pods' demands from pass to pass).
//
//	go test -run '^$' -bench ComputeQueues -benchtime 5x ./pkg/jobqueue/
func BenchmarkComputeQueues(b *testing.B) {
	var specs []queuetree.Spec
	var leaves []string
	for d := range 10 {
		dept := fmt.Sprintf("dept-%d", d)
		specs = append(specs, teamQueue(dept, "", gpus(800), queuetree.Unlimited, int64(1+d%3)))
		for t := range 10 {
			team := fmt.Sprintf("%s-team-%d", dept, t)
			specs = append(specs, teamQueue(team, dept, gpus(40), queuetree.Unlimited, int64(1+t%2)))
			leaves = append(leaves, team)
		}
	}
	rooms := make([]Room, 1000)
	queueOf := map[string]string{}
	for i := range rooms {
		rooms[i] = room(fmt.Sprintf("n%04d", i), 64, 8, 64, 8)
		if i%2 == 0 {
			// Half the nodes run a gang of 8 single-card pods of a queue.
			key := fmt.Sprintf("run-%04d", i)
			queueOf["ns/"+key] = leaves[i%len(leaves)]
			for j := range 8 {
				p := member(pod(fmt.Sprintf("%s-%d", key, j), 1, 1), key)
				p.UID = types.UID(p.Name)
				bindOn(b, &rooms[i], p, 0)
			}
		}
	}
	var groups []Group
	for i := range 10000 {
		g := group(fmt.Sprintf("w%05d", i), 1+i%4, 1, 1, i, int32(i%3))
		g.Queue = leaves[(i*7)%len(leaves)]
		for j, p := range g.Pending {
			p.UID = types.UID(fmt.Sprintf("w%05d-%d", i, j))
		}
		groups = append(groups, g)
	}
	// The queue remembers the pods' demands from pass to pass: the first
	// pass, which reads them all, is left out.
	var demands demandCache
	pass := func() Plan {
		tree, _ := queuetree.Build(specs, capacityOf(rooms))
		plan := Compute(Input{Groups: groups, Rooms: rooms, Queues: tree, QueueOf: queueOf, Backfill: true, DemandOf: demands.of})
		demands.sweep()
		return plan
	}
	pass()
	b.ResetTimer()
	admitted := 0
	cpu := cpuTime()
	for range b.N {
		plan := pass()
		admitted = 0
		for _, d := range plan.Decisions {
			if d.Admitted {
				admitted++
			}
		}
	}
	b.ReportMetric(float64(admitted), "admitted/pass")
	// The CPU the passes used, which the machine's other load does not
	// inflate as it does the wall time (ns/op).
	b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/pass")
}

// cpuTime is the CPU time this process used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
