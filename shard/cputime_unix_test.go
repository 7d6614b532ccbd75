//go:build unix

package shard

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used, user and system, all
// threads (the garbage collector's included). On a shared machine it
// measures our work better than wall time does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
