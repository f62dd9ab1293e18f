package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// IOCounters are the storage I/O counters of this process from
// /proc/self/io. WriteBytes counts bytes the process caused to be sent to
// storage, at the moment pages are dirtied (a page rewritten while still
// dirty counts once); CancelledWriteBytes counts dirty pages truncated
// away before writeback. Neither counts the filesystem's own journal.
type IOCounters struct {
	ReadBytes           int64
	WriteBytes          int64
	CancelledWriteBytes int64
}

// ReadIOCounters reads /proc/self/io. It fails where the kernel has no
// task I/O accounting (non-Linux, or CONFIG_TASK_IO_ACCOUNTING off).
func ReadIOCounters() (IOCounters, error) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return IOCounters{}, fmt.Errorf("io counters: %w", err)
	}
	return parseIOCounters(b)
}

func parseIOCounters(b []byte) (IOCounters, error) {
	var c IOCounters
	fields := map[string]*int64{
		"read_bytes":            &c.ReadBytes,
		"write_bytes":           &c.WriteBytes,
		"cancelled_write_bytes": &c.CancelledWriteBytes,
	}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, val, ok := bytes.Cut(sc.Bytes(), []byte(": "))
		dst := fields[string(name)]
		if !ok || dst == nil {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(val)), 10, 64)
		if err != nil {
			return IOCounters{}, fmt.Errorf("io counters: %s: %w", name, err)
		}
		*dst = n
		seen++
	}
	if seen != len(fields) {
		return IOCounters{}, fmt.Errorf("io counters: /proc/self/io lacks read_bytes, write_bytes or cancelled_write_bytes")
	}
	return c, nil
}

// Written is the net bytes written to storage between c and a later
// reading d.
func (c IOCounters) Written(d IOCounters) int64 {
	return (d.WriteBytes - c.WriteBytes) - (d.CancelledWriteBytes - c.CancelledWriteBytes)
}

// Read is the bytes read from storage between c and a later reading d.
func (c IOCounters) Read(d IOCounters) int64 { return d.ReadBytes - c.ReadBytes }
