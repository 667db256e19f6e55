// Package benchratio lets a Go benchmark report its throughput as a ratio to
// a baseline measured in the same run. These machines are shared and noisy,
// so an absolute figure means little on its own; subject and baseline are
// run alternately, in chunks, so both see the same noise.
package benchratio

import (
	"testing"
	"time"
)

// Chunks is how many alternating rounds Compare splits b.N into.
const Chunks = 8

// Compare runs subject and baseline alternately for b.N operations each,
// split into Chunks rounds. Each func is called with the number of
// operations to perform and must do exactly that much work. Only the
// subject is timed by the benchmark framework (so ns/op and MB/s, when the
// caller used b.SetBytes, are the subject's). It reports:
//   - "baseline_ns/op": the baseline's time per operation;
//   - "ratio": baseline time / subject time, i.e. subject throughput as a
//     fraction of the baseline's (1.0 = as fast as the baseline).
func Compare(b *testing.B, subject, baseline func(ops int)) {
	b.Helper()
	CompareSettled(b, subject, baseline, nil)
}

// CompareSettled is Compare with settle (nil: none) called after each
// round of the subject, timed for neither side: for a subject that leaves
// work running in the background (e.g. a shadow trigger finishing its
// queue) which would otherwise be charged to the baseline's round.
func CompareSettled(b *testing.B, subject, baseline func(ops int), settle func()) {
	b.Helper()
	var subj, base time.Duration
	done := 0
	b.ResetTimer()
	for c := 0; c < Chunks && done < b.N; c++ {
		n := (b.N - done) / (Chunks - c)
		if n == 0 {
			n = b.N - done
		}
		t0 := time.Now()
		subject(n)
		t1 := time.Now()
		b.StopTimer()
		if settle != nil {
			settle()
		}
		t2s := time.Now()
		baseline(n)
		t2 := time.Now()
		b.StartTimer()
		subj += t1.Sub(t0)
		base += t2.Sub(t2s)
		done += n
	}
	b.StopTimer()
	if subj <= 0 || done == 0 {
		return
	}
	b.ReportMetric(float64(base.Nanoseconds())/float64(done), "baseline_ns/op")
	b.ReportMetric(float64(base)/float64(subj), "ratio")
}
