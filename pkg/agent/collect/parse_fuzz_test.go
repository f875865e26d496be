package collect

import (
	"os"
	"path/filepath"
	"testing"
)

// addFixtures seeds f with the file rel of every fixture node.
func addFixtures(f *testing.F, rel string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*", rel))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no fixture %s: %v", rel, err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
}

func FuzzParseProcStat(f *testing.F) {
	addFixtures(f, "proc/stat")
	f.Add("cpu  1 2 3\n")
	f.Add("cpu  18446744073709551615 1 0 0\n")
	f.Add("cpu")
	f.Fuzz(func(t *testing.T, data string) {
		c, err := parseProcStat("stat", data)
		if err == nil && c.Idle > c.Total {
			t.Errorf("Idle %d > Total %d", c.Idle, c.Total)
		}
	})
}

func FuzzParseMeminfo(f *testing.F) {
	addFixtures(f, "proc/meminfo")
	f.Add("MemTotal: 9007199254740991 kB\nMemAvailable: 1 kB\n")
	f.Add("MemTotal:\n")
	f.Fuzz(func(t *testing.T, data string) {
		m, err := parseMeminfo("meminfo", data)
		if err == nil && (m.TotalBytes < 0 || m.AvailableBytes < 0) {
			t.Errorf("negative memory %+v", m)
		}
	})
}

func FuzzParseNetDev(f *testing.F) {
	addFixtures(f, "proc/net/dev")
	f.Add("h\nh\n:\n")
	f.Add("h\nh\neth0:1 2 3 4 5 6 7 8 18446744073709551615\n")
	f.Fuzz(func(t *testing.T, data string) {
		ifcs, err := parseNetDev("dev", data)
		if err != nil {
			return
		}
		for _, ifc := range ifcs {
			if ifc.Name == "" {
				t.Errorf("interface without a name: %+v", ifc)
			}
		}
	})
}

func FuzzParseDiskstats(f *testing.F) {
	addFixtures(f, "proc/diskstats")
	f.Add("8 0 sda 1 2 3 4 5 6 7 8 9 10\n")
	f.Fuzz(func(t *testing.T, data string) {
		_, _ = parseDiskstats("diskstats", data)
	})
}

func FuzzParseCPUInfo(f *testing.F) {
	addFixtures(f, "proc/cpuinfo")
	f.Add(s390CPUInfo)
	f.Add("cpu MHz : NaN\n")
	f.Fuzz(func(t *testing.T, data string) {
		info, err := parseCPUInfo("cpuinfo", data)
		if err == nil && !(info.maxMHz >= 0 && info.maxMHz <= maxPlausibleMHz) {
			t.Errorf("maxMHz %v", info.maxMHz)
		}
	})
}

func FuzzParseCPUList(f *testing.F) {
	addFixtures(f, "sys/devices/system/cpu/online")
	f.Add("0-3,8,10-11")
	f.Add("0-65535,0-65535")
	f.Fuzz(func(t *testing.T, data string) {
		n, err := parseCPUList("online", data)
		if err == nil && n <= 0 {
			t.Errorf("count %d for %q", n, data)
		}
	})
}
