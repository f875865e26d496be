package collect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// t0 and t1 are the times of the fixtures testdata/node-t0 and
// testdata/node-t1: the same 4-CPU node read 10 s apart (testdata/README.md).
var (
	t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(10 * time.Second)
)

// approx compares utilisations computed in floating point.
var approx = cmpopts.EquateApprox(0, 1e-9)

// node returns a Collector of the fixture testdata/<name>.
func node(name string) *Collector {
	return &Collector{Root: filepath.Join("testdata", name)}
}

// copyNode copies the fixture testdata/<name> to a temporary directory
// that the test may change, and returns the copy's path.
func copyNode(t *testing.T, name string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join("testdata", name))); err != nil {
		t.Fatal(err)
	}
	return root
}

// writeFile writes content to rel under root, creating directories.
func writeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	path := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceInFile replaces the first old with new in rel under root.
func replaceInFile(t *testing.T, root, rel, old, new string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q", rel, old)
	}
	writeFile(t, root, rel, strings.Replace(string(data), old, new, 1))
}

// removeAll removes rel under root.
func removeAll(t *testing.T, root, rel string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(root, rel)); err != nil {
		t.Fatal(err)
	}
}

// checkErr checks that err contains each of wantErrs, paths under root
// written relative to it, or is nil when wantErrs is empty.
func checkErr(t *testing.T, err error, root string, wantErrs []string) {
	t.Helper()
	if len(wantErrs) == 0 {
		if err != nil {
			t.Errorf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want %q", wantErrs)
	}
	for _, want := range wantErrs {
		want = strings.ReplaceAll(want, "ROOT", root)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// snapshotT0 is the Snapshot of testdata/node-t0 with the default
// selection: the physical NICs eth0 and eth1, and the whole disks sda and
// nvme0n1.
func snapshotT0() Snapshot {
	return Snapshot{
		Time: t0,
		// cpu  100000 500 30000 800000 20000 0 3000 0 5000 0
		// Total: 100000+500+30000+800000+20000+0+3000+0 = 953500 (guest 5000 is in user).
		// Idle: 800000+20000 = 820000.
		CPU: &CPUCounters{Total: 953500, Idle: 820000},
		// MemTotal 16000000 kB, MemAvailable 6000000 kB.
		Memory: &MemoryReading{TotalBytes: 16000000 * 1024, AvailableBytes: 6000000 * 1024},
		Network: &NetworkCounters{Interfaces: []InterfaceCounters{
			// rx 52000000000 + tx 31000000000; 10 Gb/s.
			{Name: "eth0", Bytes: 83000000000, SpeedMbps: 10000},
			// rx 7000000000 + tx 3000000000; speed -1, unknown.
			{Name: "eth1", Bytes: 10000000000},
		}},
		Disk: &DiskCounters{Disks: []DiskCounter{
			{Name: "nvme0n1", BusyMillis: 5000000},
			{Name: "sda", BusyMillis: 1200000},
		}},
	}
}

func TestSnapshot(t *testing.T) {
	got, err := node("node-t0").Snapshot(t0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshotT0(), got); diff != "" {
		t.Errorf("Snapshot (-want,+got):\n%s", diff)
	}
}

// TestSelection reads the two fixtures with each selection and checks the
// interfaces and disks counted and the utilisation over the 10 s between
// them.
func TestSelection(t *testing.T) {
	tests := []struct {
		name           string
		interfaces     []string
		disks          []string
		wantInterfaces []string
		wantDisks      []string
		wantNetwork    *float64
		wantDisk       *float64
	}{
		{
			// lo, docker0, cni0, flannel.1 and veth1a2b3c have no device;
			// partitions are not in /sys/block; loop0 and dm-0 are virtual.
			name:           "default: physical NICs and whole disks",
			wantInterfaces: []string{"eth0", "eth1"},
			wantDisks:      []string{"nvme0n1", "sda"},
			// eth0 +1000000000+500000000, eth1 +250000000+125000000 bytes:
			// 1875000000 B * 8 / 10 s = 1.5e9 b/s over eth0's 10000 Mb/s
			// (eth1's speed is unknown) = 0.15.
			wantNetwork: ptr(0.15),
			// sda +2500 ms, nvme0n1 +7000 ms of 10000 ms: max = 0.7.
			wantDisk: ptr(0.7),
		},
		{
			name:           "explicit physical",
			interfaces:     []string{"eth0"},
			disks:          []string{"sda"},
			wantInterfaces: []string{"eth0"},
			wantDisks:      []string{"sda"},
			// 1500000000 B * 8 / 10 s = 1.2e9 b/s / 10e9 b/s = 0.12.
			wantNetwork: ptr(0.12),
			// 2500 ms / 10000 ms.
			wantDisk: ptr(0.25),
		},
		{
			name:           "explicit virtual",
			interfaces:     []string{"veth1a2b3c"},
			disks:          []string{"dm-0", "loop0"},
			wantInterfaces: []string{"veth1a2b3c"},
			wantDisks:      []string{"dm-0", "loop0"},
			// veth +2500000000+2500000000 B * 8 / 10 s = 4e9 b/s over its
			// 10000 Mb/s = 0.4.
			wantNetwork: ptr(0.4),
			// dm-0 +9000 ms, loop0 +9999 ms of 10000 ms: max = 0.9999.
			wantDisk: ptr(0.9999),
		},
		{
			// eth1 reports speed -1.
			name:           "explicit: interface of unknown speed, partition",
			interfaces:     []string{"eth1"},
			disks:          []string{"sda1"},
			wantInterfaces: []string{"eth1"},
			wantDisks:      []string{"sda1"},
			wantNetwork:    nil,
			// 2400 ms / 10000 ms.
			wantDisk: ptr(0.24),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var snaps [2]Snapshot
			for i, fixture := range []struct {
				name string
				time time.Time
			}{{"node-t0", t0}, {"node-t1", t1}} {
				c := node(fixture.name)
				c.Interfaces, c.Disks = tc.interfaces, tc.disks
				var err error
				if snaps[i], err = c.Snapshot(fixture.time); err != nil {
					t.Fatal(err)
				}
			}
			var gotInterfaces, gotDisks []string
			for _, ifc := range snaps[1].Network.Interfaces {
				gotInterfaces = append(gotInterfaces, ifc.Name)
			}
			for _, d := range snaps[1].Disk.Disks {
				gotDisks = append(gotDisks, d.Name)
			}
			if diff := cmp.Diff(tc.wantInterfaces, gotInterfaces); diff != "" {
				t.Errorf("interfaces (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDisks, gotDisks); diff != "" {
				t.Errorf("disks (-want,+got):\n%s", diff)
			}
			u := Utilize(snaps[0], snaps[1])
			if diff := cmp.Diff(tc.wantNetwork, u.Network, approx); diff != "" {
				t.Errorf("network utilisation (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDisk, u.Disk, approx); diff != "" {
				t.Errorf("disk utilisation (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSysfsSymlinks checks selection where /sys/class/net/<if>,
// /sys/block/<d> and their device entries are symbolic links, as on a
// real node.
func TestSysfsSymlinks(t *testing.T) {
	root := copyNode(t, "node-t0")
	for _, l := range []struct{ real, link string }{
		{"sys/devices/pci0000:00/0000:3b:00.0/net/eth0", "sys/class/net/eth0"},
		{"sys/devices/pci0000:00/0000:3b:00.0/ata1/host0/target0:0:0/0:0:0:0/block/sda", "sys/block/sda"},
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, l.real)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(root, l.link), filepath.Join(root, l.real)); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(filepath.Dir(filepath.Join(root, l.link)), filepath.Join(root, l.real))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(rel, filepath.Join(root, l.link)); err != nil {
			t.Fatal(err)
		}
		// device itself is a link too: to the PCI function, here a
		// directory next to it.
		device := filepath.Join(root, l.real, "device")
		if err := os.Rename(device, device+".target"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("device.target", device); err != nil {
			t.Fatal(err)
		}
	}
	got, err := (&Collector{Root: root}).Snapshot(t0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshotT0(), got); diff != "" {
		t.Errorf("Snapshot (-want,+got):\n%s", diff)
	}
}

// TestSnapshotErrors breaks sources of a copy of testdata/node-t0 and
// checks that the errors name them and the other parts are still read.
// ROOT in wantErrs stands for the copy's path.
func TestSnapshotErrors(t *testing.T) {
	tests := []struct {
		name       string
		interfaces []string
		disks      []string
		breakNode  func(t *testing.T, root string)
		wantErrs   []string
		// wantParts changes snapshotT0 into the Snapshot wanted.
		wantParts func(s *Snapshot)
	}{
		{
			name: "corrupt /proc/stat",
			breakNode: func(t *testing.T, root string) {
				replaceInFile(t, root, "proc/stat", "800000", "8OOOOO")
			},
			wantErrs:  []string{`ROOT/proc/stat line 1: field "idle": strconv.ParseUint: parsing "8OOOOO": invalid syntax`},
			wantParts: func(s *Snapshot) { s.CPU = nil },
		},
		{
			name: "short cpu line",
			breakNode: func(t *testing.T, root string) {
				writeFile(t, root, "proc/stat", "intr 12 0\ncpu  100 0 20\ncpu0 100 0 20\n")
			},
			wantErrs:  []string{`ROOT/proc/stat line 2: want at least 4 counters after "cpu", got 3`},
			wantParts: func(s *Snapshot) { s.CPU = nil },
		},
		{
			name:      "empty /proc/stat",
			breakNode: func(t *testing.T, root string) { writeFile(t, root, "proc/stat", "") },
			wantErrs:  []string{`ROOT/proc/stat: no "cpu" line`},
			wantParts: func(s *Snapshot) { s.CPU = nil },
		},
		{
			name: "counter beyond 64 bits",
			breakNode: func(t *testing.T, root string) {
				replaceInFile(t, root, "proc/stat", "cpu  100000", "cpu  99999999999999999999999")
			},
			wantErrs:  []string{`ROOT/proc/stat line 1: field "user": strconv.ParseUint: parsing "99999999999999999999999": value out of range`},
			wantParts: func(s *Snapshot) { s.CPU = nil },
		},
		{
			name: "counters whose sum is beyond 64 bits",
			breakNode: func(t *testing.T, root string) {
				replaceInFile(t, root, "proc/stat", "cpu  100000 500", "cpu  18446744073709551615 500")
			},
			wantErrs:  []string{`ROOT/proc/stat line 1: field "nice": sum of counters out of range`},
			wantParts: func(s *Snapshot) { s.CPU = nil },
		},
		{
			name: "corrupt /proc/meminfo",
			breakNode: func(t *testing.T, root string) {
				replaceInFile(t, root, "proc/meminfo", "MemAvailable:    6000000 kB", "MemAvailable:    lots kB")
			},
			wantErrs:  []string{`ROOT/proc/meminfo line 3: field "MemAvailable": strconv.ParseInt: parsing "lots": invalid syntax`},
			wantParts: func(s *Snapshot) { s.Memory = nil },
		},
		{
			name: "meminfo in another unit",
			breakNode: func(t *testing.T, root string) {
				replaceInFile(t, root, "proc/meminfo", "16000000 kB", "16000 MB")
			},
			wantErrs:  []string{`ROOT/proc/meminfo line 1: field "MemTotal": want "<number> kB", got "16000 MB"`},
			wantParts: func(s *Snapshot) { s.Memory = nil },
		},
		{
			// Linux before 3.14.
			name: "no MemAvailable",
			breakNode: func(t *testing.T, root string) {
				replaceInFile(t, root, "proc/meminfo", "MemAvailable:", "Available:")
			},
			wantErrs:  []string{`ROOT/proc/meminfo: no MemAvailable line`},
			wantParts: func(s *Snapshot) { s.Memory = nil },
		},
		{
			name: "truncated /proc/diskstats line",
			breakNode: func(t *testing.T, root string) {
				writeFile(t, root, "proc/diskstats", ""+
					"   7       0 loop0 52 5 416 13 0 0 0 0 0 100 13 0 0 0 0 0 0\n"+
					"   8       0 sda 1523301 152330 12186408 380825 882131\n")
			},
			wantErrs:  []string{`ROOT/proc/diskstats line 2: want at least 13 fields, got 8`},
			wantParts: func(s *Snapshot) { s.Disk = nil },
		},
		{
			name: "corrupt io_ticks",
			breakNode: func(t *testing.T, root string) {
				replaceInFile(t, root, "proc/diskstats", " 0 5000000 ", " 0 -5000000 ")
			},
			wantErrs:  []string{`ROOT/proc/diskstats line 5: field "io_ticks": strconv.ParseUint: parsing "-5000000": invalid syntax`},
			wantParts: func(s *Snapshot) { s.Disk = nil },
		},
		{
			name:      "missing /proc/net/dev",
			breakNode: func(t *testing.T, root string) { removeAll(t, root, "proc/net/dev") },
			wantErrs:  []string{`open ROOT/proc/net/dev: no such file or directory`},
			wantParts: func(s *Snapshot) { s.Network = nil },
		},
		{
			name:      "empty /proc/net/dev",
			breakNode: func(t *testing.T, root string) { writeFile(t, root, "proc/net/dev", "") },
			wantErrs:  []string{`ROOT/proc/net/dev: want two header lines, got 0 lines`},
			wantParts: func(s *Snapshot) { s.Network = nil },
		},
		{
			name: "/proc/net/dev line without interface",
			breakNode: func(t *testing.T, root string) {
				replaceInFile(t, root, "proc/net/dev", "  eth1:", "  eth1 ")
			},
			wantErrs:  []string{`ROOT/proc/net/dev line 5: want "<interface>: <counters>"`},
			wantParts: func(s *Snapshot) { s.Network = nil },
		},
		{
			name: "corrupt tx_bytes",
			breakNode: func(t *testing.T, root string) {
				replaceInFile(t, root, "proc/net/dev", "31000000000", "3.1e10")
			},
			wantErrs:  []string{`ROOT/proc/net/dev line 4: field "tx_bytes": strconv.ParseUint: parsing "3.1e10": invalid syntax`},
			wantParts: func(s *Snapshot) { s.Network = nil },
		},
		{
			name: "malformed link speed",
			breakNode: func(t *testing.T, root string) {
				writeFile(t, root, "sys/class/net/eth0/speed", "10G\n")
			},
			wantErrs:  []string{`ROOT/sys/class/net/eth0/speed: strconv.ParseInt: parsing "10G": invalid syntax`},
			wantParts: func(s *Snapshot) { s.Network.Interfaces[0].SpeedMbps = 0 },
		},
		{
			// The kernel fails the read of a down link's speed; no file
			// reads the same.
			name:      "unreadable link speed",
			breakNode: func(t *testing.T, root string) { removeAll(t, root, "sys/class/net/eth0/speed") },
			wantParts: func(s *Snapshot) { s.Network.Interfaces[0].SpeedMbps = 0 },
		},
		{
			name:       "configured interfaces and disk not found",
			interfaces: []string{"eth0", "bond0", "eth2"},
			disks:      []string{"sdb"},
			breakNode:  func(*testing.T, string) {},
			wantErrs: []string{
				`ROOT/proc/net/dev: configured interfaces ["bond0" "eth2"] not found`,
				`ROOT/proc/diskstats: configured disks ["sdb"] not found`,
			},
			wantParts: func(s *Snapshot) { s.Network, s.Disk = nil, nil },
		},
		{
			name: "two sources fail",
			breakNode: func(t *testing.T, root string) {
				removeAll(t, root, "proc/stat")
				writeFile(t, root, "proc/diskstats", "   8       0 sda 1\n")
			},
			wantErrs: []string{
				`open ROOT/proc/stat: no such file or directory`,
				`ROOT/proc/diskstats line 1: want at least 13 fields, got 4`,
			},
			wantParts: func(s *Snapshot) { s.CPU, s.Disk = nil, nil },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyNode(t, "node-t0")
			tc.breakNode(t, root)
			c := &Collector{Root: root, Interfaces: tc.interfaces, Disks: tc.disks}
			got, err := c.Snapshot(t0)
			checkErr(t, err, root, tc.wantErrs)
			want := snapshotT0()
			tc.wantParts(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Snapshot (-want,+got):\n%s", diff)
			}
		})
	}
}

func ptr(v float64) *float64 { return &v }
