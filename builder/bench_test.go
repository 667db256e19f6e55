package builder

import (
	"context"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/internal/benchratio"
	"github.com/sluice-daq/sluice/schemas"
)

// cpuTime is the process's user+system CPU time: the benchmarks report
// throughput per CPU second as well as per wall second, because the builder
// works on two goroutines (the adder and the emitter) that run in parallel.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// drain waits until every event emitted so far was delivered, closing the
// partial batch, without flushing open events (so that a timed chunk does
// not leave assembly work for the next one, nor cut events short).
func drain(b *Builder) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushTo = b.moved
	b.signal()
	for b.sent < b.moved {
		_ = b.sleepLocked(context.Background())
	}
}

// consume receives and releases every batch, as a trigger would.
func consume(b *Builder) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for rec := range b.Batches() {
			rec.Release()
		}
	}()
	return done
}

func finish(tb testing.TB, b *Builder, done chan struct{}) {
	if err := b.Close(context.Background()); err != nil {
		tb.Fatal(err)
	}
	<-done
	if l := b.Ledger(); !l.Balanced() || l.FragmentsOpen != 0 {
		tb.Fatalf("ledger after the benchmark: %+v", l)
	}
}

// BenchmarkMFP128B1024Sources: 128-byte fragments from 1024 sources, each
// source sending multi-fragment packets of packing factor 10. One op is one
// packet (10 fragments). The packets are encoded once; the loop walks event
// ranges with increasing event ids by setting each packet view's
// FirstEventID. Baseline: copying the same payload bytes, 128 bytes at a
// time, into a preallocated buffer the size of one batch's payload.
func BenchmarkMFP128B1024Sources(b *testing.B) {
	const nsrc, packing, size = 1024, 10, 128
	sources := make([]uint32, nsrc)
	for i := range sources {
		sources[i] = uint32(i)
	}
	rng := rand.New(rand.NewSource(1))
	pkts := make([]schemas.MFP, nsrc)
	var payloads [][]byte
	for s := range pkts {
		pay := make([][]byte, packing)
		for i := range pay {
			pay[i] = make([]byte, size)
			rng.Read(pay[i])
		}
		p, _, err := schemas.DecodeMFP(schemas.AppendMFP(nil, uint32(s), 0, 0, 3, pay, nil))
		if err != nil {
			b.Fatal(err)
		}
		pkts[s] = p
		p.Fragments(func(_ int, _ uint64, _ uint32, payload []byte) bool {
			payloads = append(payloads, payload)
			return true
		})
	}
	bld, err := New(Config{Groups: []schemas.SourceGroup{{Name: "all", Sources: sources}}})
	if err != nil {
		b.Fatal(err)
	}
	done := consume(bld)
	ctx := context.Background()
	dst := make([]byte, Defaults().BatchEvents*nsrc*size)
	var next int // packets sent so far, across chunks
	var cpu time.Duration
	subject := func(ops int) {
		c0 := cpuTime()
		for range ops {
			p := pkts[next%nsrc]
			p.FirstEventID = uint64(next/nsrc) * packing
			if err := bld.AddPacket(ctx, p, nil); err != nil {
				b.Fatal(err)
			}
			next++
		}
		drain(bld)
		cpu += cpuTime() - c0
	}
	baseline := func(ops int) {
		off := 0
		for i := range ops * packing {
			if off+size > len(dst) {
				off = 0
			}
			off += copy(dst[off:], payloads[i%len(payloads)])
		}
	}
	// Warm up: fill the pools (event states, batch buffers) and touch the
	// baseline's buffer, so that both are measured in steady state, not
	// first-touch page faults (~15 µs per fresh 4 KiB page on the 2-core CI machines).
	warm := 3 * Defaults().BatchEvents * nsrc / packing
	subject(warm)
	baseline(warm)
	cpu = 0
	b.ReportAllocs()
	benchratio.Compare(b, subject, baseline)
	b.ReportMetric(float64(b.N*packing)/b.Elapsed().Seconds(), "fragments/s")
	b.ReportMetric(float64(b.N*packing)/cpu.Seconds(), "fragments/cpu-s")
	b.StopTimer()
	finish(b, bld, done)
}

// BenchmarkFragments64KiB16Sources: 64 KiB native fragments from 16
// sources, one AddFragment per fragment; batches of 16 events (16 MiB).
// Baseline: copying the same bytes in 64 KiB pieces into a preallocated
// buffer of one batch's size.
func BenchmarkFragments64KiB16Sources(b *testing.B) {
	const nsrc, size, batch = 16, 64 << 10, 16
	sources := make([]uint32, nsrc)
	frags := make([]schemas.Fragment, nsrc)
	rng := rand.New(rand.NewSource(2))
	for i := range sources {
		sources[i] = uint32(100 + i)
		p := make([]byte, size)
		rng.Read(p)
		frags[i] = schemas.Fragment{SourceID: sources[i], Payload: p, CRC: schemas.Checksum(p)}
	}
	bld, err := New(Config{Groups: []schemas.SourceGroup{{Name: "all", Sources: sources}}, BatchEvents: batch})
	if err != nil {
		b.Fatal(err)
	}
	done := consume(bld)
	ctx := context.Background()
	dst := make([]byte, batch*nsrc*size)
	var next int
	var cpu time.Duration
	subject := func(ops int) {
		c0 := cpuTime()
		for range ops {
			f := frags[next%nsrc]
			f.EventID = uint64(next / nsrc)
			if err := bld.AddFragment(ctx, f, nil); err != nil {
				b.Fatal(err)
			}
			next++
		}
		drain(bld)
		cpu += cpuTime() - c0
	}
	baseline := func(ops int) {
		off := 0
		for i := range ops {
			if off+size > len(dst) {
				off = 0
			}
			off += copy(dst[off:], frags[i%nsrc].Payload)
		}
	}
	warm := 3 * batch * nsrc // see BenchmarkMFP128B1024Sources
	subject(warm)
	baseline(warm)
	cpu = 0
	b.SetBytes(size)
	b.ReportAllocs()
	benchratio.Compare(b, subject, baseline)
	b.ReportMetric(float64(b.N)*size/1e6/cpu.Seconds(), "MB/cpu-s")
	b.StopTimer()
	finish(b, bld, done)
}
