package collect

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestUtilizeFixtures checks each utilisation of the fixture node over the
// 10 s between testdata/node-t0 and testdata/node-t1.
func TestUtilizeFixtures(t *testing.T) {
	prev, err := node("node-t0").Snapshot(t0)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := node("node-t1").Snapshot(t1)
	if err != nil {
		t.Fatal(err)
	}
	want := Utilization{
		// cpu line t0: 100000 500 30000 800000 20000 0 3000 0 (5000 0)
		// cpu line t1: 101800 500 30400 801500 20100 0 3200 0 (5300 0)
		// total delta: 1800+0+400+1500+100+0+200+0 = 4000 jiffies
		// (4 CPUs * 100 Hz * 10 s); idle delta: 1500+100 = 1600.
		// 1 - 1600/4000 = 0.6.
		CPU: ptr(0.6),
		// t1: (16000000 - 4000000) kB / 16000000 kB = 0.75.
		Memory: ptr(0.75),
		// eth0 +1000000000 rx +500000000 tx, eth1 +250000000 rx
		// +125000000 tx = 1875000000 B; * 8 / 10 s = 1.5e9 b/s; eth0's
		// 10000 Mb/s is the only known speed: 1.5e9 / 10e9 = 0.15.
		Network: ptr(0.15),
		// sda 1200000 -> 1202500 ms, nvme0n1 5000000 -> 5007000 ms;
		// busiest: 7000 ms / 10000 ms = 0.7.
		Disk: ptr(0.7),
	}
	if diff := cmp.Diff(want, Utilize(prev, cur), approx); diff != "" {
		t.Errorf("Utilize (-want,+got):\n%s", diff)
	}
}

func TestUtilize(t *testing.T) {
	// base is a window of 2 s in which every utilisation is known:
	//   CPU: 1 - (700-600)/(1400-1000) = 1 - 100/400 = 0.75
	//   Memory: (1000-400)/1000 = 0.6
	//   Network: 50e6 B * 8 / 2 s = 200e6 b/s over 1000 Mb/s = 0.2
	//   Disk: 500 ms / 2000 ms = 0.25
	base := func() (prev, cur Snapshot) {
		prev = Snapshot{
			Time:    t0,
			CPU:     &CPUCounters{Total: 1000, Idle: 600},
			Memory:  &MemoryReading{TotalBytes: 1000, AvailableBytes: 250},
			Network: &NetworkCounters{Interfaces: []InterfaceCounters{{Name: "eth0", Bytes: 0, SpeedMbps: 1000}}},
			Disk:    &DiskCounters{Disks: []DiskCounter{{Name: "sda", BusyMillis: 0}}},
		}
		cur = Snapshot{
			Time:    t0.Add(2 * time.Second),
			CPU:     &CPUCounters{Total: 1400, Idle: 700},
			Memory:  &MemoryReading{TotalBytes: 1000, AvailableBytes: 400},
			Network: &NetworkCounters{Interfaces: []InterfaceCounters{{Name: "eth0", Bytes: 50e6, SpeedMbps: 1000}}},
			Disk:    &DiskCounters{Disks: []DiskCounter{{Name: "sda", BusyMillis: 500}}},
		}
		return prev, cur
	}
	tests := []struct {
		name   string
		change func(prev, cur *Snapshot)
		want   Utilization
	}{
		{
			name:   "all known",
			change: func(prev, cur *Snapshot) {},
			want:   Utilization{CPU: ptr(0.75), Memory: ptr(0.6), Network: ptr(0.2), Disk: ptr(0.25)},
		},
		{
			name:   "parts missing in prev",
			change: func(prev, cur *Snapshot) { prev.CPU, prev.Network, prev.Disk = nil, nil, nil },
			want:   Utilization{Memory: ptr(0.6)},
		},
		{
			name:   "parts missing in cur",
			change: func(prev, cur *Snapshot) { *cur = Snapshot{Time: cur.Time} },
			want:   Utilization{},
		},
		{
			// Memory is a level: cur alone gives it.
			name:   "memory missing in prev",
			change: func(prev, cur *Snapshot) { prev.Memory = nil },
			want:   Utilization{CPU: ptr(0.75), Memory: ptr(0.6), Network: ptr(0.2), Disk: ptr(0.25)},
		},
		{
			name:   "no memory total",
			change: func(prev, cur *Snapshot) { cur.Memory = &MemoryReading{} },
			want:   Utilization{CPU: ptr(0.75), Network: ptr(0.2), Disk: ptr(0.25)},
		},
		{
			// (1000-1200)/1000 = -0.2, clamped.
			name:   "available above total",
			change: func(prev, cur *Snapshot) { cur.Memory.AvailableBytes = 1200 },
			want:   Utilization{CPU: ptr(0.75), Memory: ptr(0), Network: ptr(0.2), Disk: ptr(0.25)},
		},
		{
			name:   "zero elapsed time",
			change: func(prev, cur *Snapshot) { cur.Time = prev.Time },
			want:   Utilization{Memory: ptr(0.6)},
		},
		{
			name:   "snapshots swapped",
			change: func(prev, cur *Snapshot) { *prev, *cur = *cur, *prev },
			// Memory of the "cur", really the earlier snapshot:
			// (1000-250)/1000.
			want: Utilization{Memory: ptr(0.75)},
		},
		{
			name:   "cpu counter went backwards",
			change: func(prev, cur *Snapshot) { cur.CPU = &CPUCounters{Total: 900, Idle: 700} },
			want:   Utilization{Memory: ptr(0.6), Network: ptr(0.2), Disk: ptr(0.25)},
		},
		{
			// Within one tick of the clock.
			name:   "no cpu time passed",
			change: func(prev, cur *Snapshot) { cur.CPU = &CPUCounters{Total: 1000, Idle: 600} },
			want:   Utilization{Memory: ptr(0.6), Network: ptr(0.2), Disk: ptr(0.25)},
		},
		{
			// 1 - (1100-600)/(1400-1000) = 1 - 500/400 < 0, clamped.
			name:   "idle grew more than total",
			change: func(prev, cur *Snapshot) { cur.CPU.Idle = 1100 },
			want:   Utilization{CPU: ptr(0), Memory: ptr(0.6), Network: ptr(0.2), Disk: ptr(0.25)},
		},
		{
			// The interface was re-created between the snapshots.
			name:   "network counter went backwards",
			change: func(prev, cur *Snapshot) { prev.Network.Interfaces[0].Bytes = 60e6 },
			want:   Utilization{CPU: ptr(0.75), Memory: ptr(0.6), Disk: ptr(0.25)},
		},
		{
			name:   "no known link speed",
			change: func(prev, cur *Snapshot) { cur.Network.Interfaces[0].SpeedMbps = 0 },
			want:   Utilization{CPU: ptr(0.75), Memory: ptr(0.6), Disk: ptr(0.25)},
		},
		{
			// eth1 adds 50e6 B but no capacity: 100e6 B * 8 / 2 s =
			// 400e6 b/s over 1000 Mb/s = 0.4.
			name: "traffic of an interface of unknown speed",
			change: func(prev, cur *Snapshot) {
				prev.Network.Interfaces = append(prev.Network.Interfaces, InterfaceCounters{Name: "eth1", Bytes: 10e6})
				cur.Network.Interfaces = append(cur.Network.Interfaces, InterfaceCounters{Name: "eth1", Bytes: 60e6})
			},
			want: Utilization{CPU: ptr(0.75), Memory: ptr(0.6), Network: ptr(0.4), Disk: ptr(0.25)},
		},
		{
			// eth2 is only in cur: neither its bytes nor its speed count.
			name: "interface new in cur",
			change: func(prev, cur *Snapshot) {
				cur.Network.Interfaces = append(cur.Network.Interfaces, InterfaceCounters{Name: "eth2", Bytes: 1e9, SpeedMbps: 1000})
			},
			want: Utilization{CPU: ptr(0.75), Memory: ptr(0.6), Network: ptr(0.2), Disk: ptr(0.25)},
		},
		{
			// 1e9 B * 8 / 2 s = 4e9 b/s over 1000 Mb/s = 4, clamped.
			name:   "network above link speed",
			change: func(prev, cur *Snapshot) { cur.Network.Interfaces[0].Bytes = 1e9 },
			want:   Utilization{CPU: ptr(0.75), Memory: ptr(0.6), Network: ptr(1), Disk: ptr(0.25)},
		},
		{
			// sda 500 ms, nvme0n1 1500 ms of 2000 ms: max = 0.75.
			name: "busiest disk",
			change: func(prev, cur *Snapshot) {
				prev.Disk.Disks = append(prev.Disk.Disks, DiskCounter{Name: "nvme0n1", BusyMillis: 100})
				cur.Disk.Disks = append(cur.Disk.Disks, DiskCounter{Name: "nvme0n1", BusyMillis: 1600})
			},
			want: Utilization{CPU: ptr(0.75), Memory: ptr(0.6), Network: ptr(0.2), Disk: ptr(0.75)},
		},
		{
			// io_ticks is printed as 32 bits and wraps after 2^32 ms.
			name:   "disk counter wrapped",
			change: func(prev, cur *Snapshot) { prev.Disk.Disks[0].BusyMillis = 4294967000 },
			want:   Utilization{CPU: ptr(0.75), Memory: ptr(0.6), Network: ptr(0.2)},
		},
		{
			// 2500 ms / 2000 ms, clamped.
			name:   "disk busier than elapsed",
			change: func(prev, cur *Snapshot) { cur.Disk.Disks[0].BusyMillis = 2500 },
			want:   Utilization{CPU: ptr(0.75), Memory: ptr(0.6), Network: ptr(0.2), Disk: ptr(1)},
		},
		{
			name:   "no disk in both",
			change: func(prev, cur *Snapshot) { cur.Disk.Disks[0].Name = "sdb" },
			want:   Utilization{CPU: ptr(0.75), Memory: ptr(0.6), Network: ptr(0.2)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prev, cur := base()
			tc.change(&prev, &cur)
			if diff := cmp.Diff(tc.want, Utilize(prev, cur), approx); diff != "" {
				t.Errorf("Utilize (-want,+got):\n%s", diff)
			}
		})
	}
}
