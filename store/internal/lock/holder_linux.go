package lock

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// holders names the processes /proc/locks lists as holding a lock on the
// file at path (flock or POSIX, granted, not waiting): "this process" or
// "process PID (COMM)", joined with ", "; "" when none is found (the
// holder is in another PID namespace, /proc is not mounted, or the lock
// was released meanwhile).
func holders(path string) string {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return ""
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return ""
	}
	// A line: "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; a waiter's
	// has "->" after the number and is skipped.
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	var who []string
	seen := map[int]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] == "->" || f[5] != file {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || pid <= 0 || seen[pid] {
			continue
		}
		seen[pid] = true
		who = append(who, processName(pid))
	}
	return strings.Join(who, ", ")
}

// processName is "this process" for this one, else "process PID (COMM)",
// or "process PID" when its command name cannot be read.
func processName(pid int) string {
	if pid == os.Getpid() {
		return fmt.Sprintf("this process (pid %d)", pid)
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if name := strings.TrimSpace(string(comm)); err == nil && name != "" {
		return fmt.Sprintf("process %d (%s)", pid, name)
	}
	return fmt.Sprintf("process %d", pid)
}
