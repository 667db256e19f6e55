package shm

import (
	"context"
	"testing"

	"github.com/sluice-daq/sluice/internal/benchratio"
	"github.com/sluice-daq/sluice/node/internal/transporttest"
)

// BenchmarkShmRing: 64 KiB packets from a writer process through the ring
// into a ShmInput and a counting sink, against copying the same bytes in
// 64 KiB pieces into a preallocated buffer (what the writer's DMA-like copy
// costs on its own).
func BenchmarkShmRing(b *testing.B) {
	name := ringName(b)
	child := transporttest.StartChild(b, "shm", name)
	in := NewInput(name, ReaderConfig{})
	sink := transporttest.NewCountSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, sink) }()
	defer func() { cancel(); <-done }()

	src := transporttest.MFP(0, benchPacket)
	dst := make([]byte, 16<<20)
	for i := range dst {
		dst[i] = 1 // touched once: the baseline copies into warm memory, as the ring does
	}
	off := 0
	b.SetBytes(benchPacket)
	benchratio.Compare(b, func(n int) {
		sink.Expect(n)
		child.Do(b, "w", n)
		<-sink.Reached
		child.Wait(b)
	}, func(n int) {
		for range n {
			copy(dst[off:off+benchPacket], src)
			if off += benchPacket; off == len(dst) {
				off = 0
			}
		}
	})
}

// BenchmarkShmRingSameProcess is BenchmarkShmRing with the writer a
// goroutine of the benchmark process: the ring's own cost without a second
// process to schedule.
func BenchmarkShmRingSameProcess(b *testing.B) {
	name := ringName(b)
	w, err := CreateWriter(name, WriterConfig{DataSize: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	in := NewInput(name, ReaderConfig{})
	sink := transporttest.NewCountSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, sink) }()
	defer func() { cancel(); <-done }()
	src := transporttest.MFP(0, benchPacket)
	dst := make([]byte, 16<<20)
	for i := range dst {
		dst[i] = 1
	}
	off := 0
	b.SetBytes(benchPacket)
	benchratio.Compare(b, func(n int) {
		sink.Expect(n)
		for range n {
			if err := w.Write(ctx, src); err != nil {
				b.Fatal(err)
			}
		}
		w.Flush()
		<-sink.Reached
	}, func(n int) {
		for range n {
			copy(dst[off:off+benchPacket], src)
			if off += benchPacket; off == len(dst) {
				off = 0
			}
		}
	})
}
