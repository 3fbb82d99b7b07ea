// Package benchcpu reports a benchmark's CPU time per operation: on a
// shared machine, wall time measures the neighbours as much as the code.
package benchcpu

import (
	"syscall"
	"testing"
)

// Report starts counting the process's CPU time (user and system, every
// thread) and returns the function that reports it, divided by b.N, as the
// metric cpu-ns/op: call it once the timed loop is done, as in
// `defer benchcpu.Report(b)()`.
func Report(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

// cpuTime is the process's user and system CPU time in nanoseconds, or 0
// if the system does not say.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
