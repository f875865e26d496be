package collect

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// s390x prints no "processor" lines of the usual form and no "cpu MHz".
const s390CPUInfo = `vendor_id       : IBM/S390
# processors    : 7
bogomips per cpu: 3241.00
max thread id   : 0
features	: esan3 zarch stfle msa ldisp eimm dfp edat etf3eh highgprs te vx sie
processor 0: version = FF,  identification = 0133E8,  machine = 2964
processor 1: version = FF,  identification = 0133E8,  machine = 2964
`

func TestPerformance(t *testing.T) {
	tests := []struct {
		name       string
		interfaces []string
		breakNode  func(t *testing.T, root string)
		// wantErrs are parts of the error; ROOT stands for the node's path.
		wantErrs []string
		want     Performance
	}{
		{
			name:      "cpufreq",
			breakNode: func(*testing.T, string) {},
			want: Performance{
				// 4 "processor" entries in /proc/cpuinfo.
				Cores: 4,
				// cpuinfo_max_freq 3200000, 3200000, 3900000, 3200000 kHz.
				MaxFrequencyMHz: 3900,
				// MemTotal 16000000 kB.
				MemoryBytes: 16000000 * 1024,
				// eth0 10000 Mb/s; eth1 -1 (unknown); veth not counted.
				NetworkMbps: 10000,
			},
		},
		{
			name: "no cpufreq: highest cpu MHz of cpuinfo",
			breakNode: func(t *testing.T, root string) {
				for _, cpu := range []string{"cpu0", "cpu1", "cpu2", "cpu3"} {
					removeAll(t, root, "sys/devices/system/cpu/"+cpu+"/cpufreq")
				}
			},
			// cpu MHz 1198.734, 3200.000, 2394.513, 1000.021.
			want: Performance{Cores: 4, MaxFrequencyMHz: 3200, MemoryBytes: 16384000000, NetworkMbps: 10000},
		},
		{
			name: "no sysfs CPUs at all",
			breakNode: func(t *testing.T, root string) {
				removeAll(t, root, "sys/devices/system/cpu")
				replaceInFile(t, root, "proc/cpuinfo", "3200.000", "3200.501")
			},
			// 3200.501 rounds to 3201.
			want: Performance{Cores: 4, MaxFrequencyMHz: 3201, MemoryBytes: 16384000000, NetworkMbps: 10000},
		},
		{
			name: "no processor lines: online CPUs",
			breakNode: func(t *testing.T, root string) {
				writeFile(t, root, "proc/cpuinfo", s390CPUInfo)
				writeFile(t, root, "sys/devices/system/cpu/online", "0-5,8\n")
			},
			// 0-5 and 8: 7 CPUs.
			want: Performance{Cores: 7, MaxFrequencyMHz: 3900, MemoryBytes: 16384000000, NetworkMbps: 10000},
		},
		{
			name: "no frequency known",
			breakNode: func(t *testing.T, root string) {
				removeAll(t, root, "sys/devices/system/cpu/cpu0")
				removeAll(t, root, "sys/devices/system/cpu/cpu1")
				removeAll(t, root, "sys/devices/system/cpu/cpu2")
				removeAll(t, root, "sys/devices/system/cpu/cpu3")
				writeFile(t, root, "proc/cpuinfo", s390CPUInfo)
			},
			want: Performance{Cores: 4, MemoryBytes: 16384000000, NetworkMbps: 10000},
		},
		{
			name: "malformed cpuinfo_max_freq",
			breakNode: func(t *testing.T, root string) {
				writeFile(t, root, "sys/devices/system/cpu/cpu2/cpufreq/cpuinfo_max_freq", "3.9GHz\n")
			},
			wantErrs: []string{`ROOT/sys/devices/system/cpu/cpu2/cpufreq/cpuinfo_max_freq: strconv.ParseUint: parsing "3.9GHz": invalid syntax`},
			// The other CPUs still give 3200000 kHz.
			want: Performance{Cores: 4, MaxFrequencyMHz: 3200, MemoryBytes: 16384000000, NetworkMbps: 10000},
		},
		{
			name: "malformed cpu MHz",
			breakNode: func(t *testing.T, root string) {
				replaceInFile(t, root, "proc/cpuinfo", "1198.734", "fast")
			},
			wantErrs: []string{`ROOT/proc/cpuinfo line 8: field "cpu MHz": strconv.ParseFloat: parsing "fast": invalid syntax`},
			// Cores from online "0-3"; frequency from cpufreq.
			want: Performance{Cores: 4, MaxFrequencyMHz: 3900, MemoryBytes: 16384000000, NetworkMbps: 10000},
		},
		{
			name: "implausible cpu MHz",
			breakNode: func(t *testing.T, root string) {
				replaceInFile(t, root, "proc/cpuinfo", "1198.734", "1e300")
			},
			wantErrs: []string{`ROOT/proc/cpuinfo line 8: field "cpu MHz": 1e+300 MHz out of range`},
			want:     Performance{Cores: 4, MaxFrequencyMHz: 3900, MemoryBytes: 16384000000, NetworkMbps: 10000},
		},
		{
			name: "no cpuinfo, malformed online",
			breakNode: func(t *testing.T, root string) {
				removeAll(t, root, "proc/cpuinfo")
				writeFile(t, root, "sys/devices/system/cpu/online", "0-\n")
			},
			wantErrs: []string{
				`open ROOT/proc/cpuinfo: no such file or directory`,
				`ROOT/sys/devices/system/cpu/online: "0-": strconv.ParseUint: parsing "": invalid syntax`,
			},
			want: Performance{MaxFrequencyMHz: 3900, MemoryBytes: 16384000000, NetworkMbps: 10000},
		},
		{
			name: "no meminfo, no net/dev",
			breakNode: func(t *testing.T, root string) {
				removeAll(t, root, "proc/meminfo")
				removeAll(t, root, "proc/net/dev")
			},
			wantErrs: []string{
				`open ROOT/proc/meminfo: no such file or directory`,
				`open ROOT/proc/net/dev: no such file or directory`,
			},
			want: Performance{Cores: 4, MaxFrequencyMHz: 3900},
		},
		{
			// 10000 + 10000 Mb/s.
			name:       "explicit interfaces",
			interfaces: []string{"eth0", "veth1a2b3c"},
			breakNode:  func(*testing.T, string) {},
			want:       Performance{Cores: 4, MaxFrequencyMHz: 3900, MemoryBytes: 16384000000, NetworkMbps: 20000},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyNode(t, "node-t0")
			tc.breakNode(t, root)
			got, err := (&Collector{Root: root, Interfaces: tc.interfaces}).Performance()
			checkErr(t, err, root, tc.wantErrs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Performance (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		name    string
		list    string
		want    int
		wantErr string
	}{
		{name: "one CPU", list: "0\n", want: 1},
		{name: "range", list: "0-3\n", want: 4},
		{name: "ranges and singles", list: "0-3,8,10-11\n", want: 7},
		{name: "largest", list: "0-65535", want: 65536},
		{name: "empty", list: "\n", wantErr: "online: empty CPU list"},
		{name: "backwards", list: "3-1", wantErr: `online: "3-1": range ends before it starts`},
		{name: "open range", list: "0-", wantErr: `online: "0-": strconv.ParseUint: parsing "": invalid syntax`},
		{name: "not a number", list: "0,a", wantErr: `online: "a": strconv.ParseUint: parsing "a": invalid syntax`},
		{name: "too large", list: "0-70000", wantErr: `online: "0-70000": strconv.ParseUint: parsing "70000": value out of range`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPUList("online", tc.list)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("count (-want,+got):\n%s", diff)
			}
		})
	}
}
