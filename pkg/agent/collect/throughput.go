package collect

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"
)

// throughputChunk is the size of each write of MeasureDiskThroughput, large
// enough that system call overhead does not count and small enough to keep
// the agent's memory flat whatever size it is asked to write.
const throughputChunk = 1 << 20

// MeasureDiskThroughput writes size bytes to a temporary file in dir,
// fsyncs it, removes it, and returns the sequential write throughput in
// MB/s (10^6 bytes/s), timed from the first write to the end of the fsync.
// The agent calls it once at start when the operator did not configure the
// disk speed; dir should be on the disk that pods use (the kubelet's root
// directory, not a tmpfs), and size well above the disk's write cache for a
// sustained rather than a burst figure.
func MeasureDiskThroughput(dir string, size int64) (float64, error) {
	if size <= 0 {
		return 0, fmt.Errorf("measuring disk throughput: size %d is not positive", size)
	}
	f, err := os.CreateTemp(dir, ".aisched-throughput-*")
	if err != nil {
		return 0, fmt.Errorf("measuring disk throughput: %w", err)
	}
	elapsed, werr := writeSynced(f, size)
	// The file goes whatever happened: a failed measurement must not leave
	// a large file behind on the node.
	err = errors.Join(werr, f.Close(), os.Remove(f.Name()))
	if err != nil {
		return 0, fmt.Errorf("measuring disk throughput: %w", err)
	}
	if elapsed <= 0 {
		return 0, fmt.Errorf("measuring disk throughput: writing %d bytes to %s took no measurable time", size, dir)
	}
	return float64(size) / elapsed.Seconds() / 1e6, nil
}

// writeSynced writes size bytes to f and fsyncs it, and returns how long
// that took.
func writeSynced(f *os.File, size int64) (time.Duration, error) {
	// Random content, so that a compressing file system (btrfs, ZFS) does
	// not turn the measurement into one of its compressor.
	buf := make([]byte, min(size, throughputChunk))
	_, _ = rand.NewChaCha8([32]byte{}).Read(buf)
	start := time.Now()
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			return 0, err
		}
		left -= n
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
