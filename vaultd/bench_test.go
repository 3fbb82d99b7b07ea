package vaultd_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// Run with -benchtime=10000x for the figures: 10,000 new secrets,
// and 10,000 unchanged ones, each sealed through the socket.

// BenchmarkSealNew makes and seals one new secret per op: value made,
// sealed to a node, the record encrypted and written with fsync.
func BenchmarkSealNew(b *testing.B) {
	ctx := context.Background()
	v := vaulttest.Start(b)
	node := vaulttest.NewNode(b).Recipient().String()
	b.ResetTimer()
	for i := range b.N {
		if _, err := v.Client.Seal(ctx, client.SealRequest{Name: "new-" + strconv.Itoa(i), Recipients: []string{node}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSealUnchanged seals secrets that exist and whose ciphertext is
// cached: what every reconcile of an unchanged mesh asks.
func BenchmarkSealUnchanged(b *testing.B) {
	ctx := context.Background()
	v := vaulttest.Start(b)
	node := vaulttest.NewNode(b).Recipient().String()
	n := min(b.N, 10000)
	reqs := make([]client.SealRequest, n)
	for i := range reqs {
		reqs[i] = client.SealRequest{Name: "old-" + strconv.Itoa(i), Recipients: []string{node}}
		if _, err := v.Client.Seal(ctx, reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		resp, err := v.Client.Seal(ctx, reqs[i%n])
		if err != nil {
			b.Fatal(err)
		}
		if resp.Version != 1 {
			b.Fatalf("version %d", resp.Version)
		}
	}
}

// BenchmarkSealNewParallel makes new secrets from 4 clients per CPU, as a
// reconciler sealing with several workers does: writes of different secrets
// (and their fsyncs) overlap.
func BenchmarkSealNewParallel(b *testing.B) {
	ctx := context.Background()
	v := vaulttest.Start(b)
	node := vaulttest.NewNode(b).Recipient().String()
	var next atomic.Int64
	b.SetParallelism(4) // 4 x GOMAXPROCS clients
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := "par-" + strconv.FormatInt(next.Add(1), 10)
			if _, err := v.Client.Seal(ctx, client.SealRequest{Name: name, Recipients: []string{node}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkSealBatchNew makes and seals new secrets in batches of 256, as
// the reconciler's first reconcile does: one request and one group write
// (two fsyncs) per batch, each secret sealed to one of 64 nodes. It reports
// the time, the CPU time (client and vaultd, every thread: on a shared
// machine the steadier figure) and the allocations per secret.
func BenchmarkSealBatchNew(b *testing.B) {
	ctx := context.Background()
	v := vaulttest.Start(b)
	nodes := make([]string, 64)
	for i := range nodes {
		nodes[i] = vaulttest.NewNode(b).Recipient().String()
	}
	const size = 256
	n := 0
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	cpu := cpuTime()
	for b.Loop() {
		reqs := make([]client.SealRequest, size)
		for i := range reqs {
			n++
			reqs[i] = client.SealRequest{Name: "mesh/batch-" + strconv.Itoa(n) + "/password", Recipients: []string{nodes[n%len(nodes)]}}
		}
		res, err := v.Client.SealBatch(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	cpu = cpuTime() - cpu
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(cpu)/float64(n), "cpu-ns/secret")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/secret")
	b.ReportMetric(float64(ms.Mallocs-mallocs)/float64(n), "allocs/secret")
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
