package schemas

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// Checksum3 is Checksum of each of its three buffers, whatever their
// lengths and alignments (the interleaved part runs over the common
// length, each rest on its own).
func TestChecksum3(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 3*4200)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for _, lens := range [][3]int{{0, 0, 0}, {1, 2, 3}, {63, 64, 65}, {64, 64, 64}, {1000, 1000, 1000}, {1000, 17, 4000}, {4096, 4095, 4097}, {200, 1000, 64}} {
		for _, off := range [][3]int{{0, 0, 0}, {1, 3, 7}, {5, 0, 2}} {
			a := buf[off[0] : off[0]+lens[0]]
			b := buf[4200+off[1] : 4200+off[1]+lens[1]]
			c := buf[8400+off[2] : 8400+off[2]+lens[2]]
			ga, gb, gc := Checksum3(a, b, c)
			if wa, wb, wc := Checksum(a), Checksum(b), Checksum(c); ga != wa || gb != wb || gc != wc {
				t.Errorf("lengths %v offsets %v: Checksum3 %08x %08x %08x, Checksum %08x %08x %08x", lens, off, ga, gb, gc, wa, wb, wc)
			}
		}
	}
	// A flipped bit in any one of them changes that one's CRC only.
	a, b, c := buf[:1000], buf[1000:2000], buf[2000:3000]
	wa, wb, wc := Checksum3(a, b, c)
	for i, p := range [][]byte{a, b, c} {
		p[999] ^= 4
		ga, gb, gc := Checksum3(a, b, c)
		p[999] ^= 4
		if changed := [3]bool{ga != wa, gb != wb, gc != wc}; changed != [3]bool{i == 0, i == 1, i == 2} {
			t.Errorf("bit flipped in buffer %d: changed %v", i, changed)
		}
	}
}

// FuzzChecksum3 splits the input in three at two points taken from its
// first bytes and checks Checksum3 against Checksum.
func FuzzChecksum3(f *testing.F) {
	f.Add([]byte{10, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30})
	f.Add(make([]byte, 3000))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 4 {
			return
		}
		rest := in[4:]
		i := int(uint16(in[0])|uint16(in[1])<<8) % (len(rest) + 1)
		j := i + int(uint16(in[2])|uint16(in[3])<<8)%(len(rest)-i+1)
		a, b, c := rest[:i], rest[i:j], rest[j:]
		ga, gb, gc := Checksum3(a, b, c)
		if wa, wb, wc := Checksum(a), Checksum(b), Checksum(c); ga != wa || gb != wb || gc != wc {
			t.Fatalf("lengths %d %d %d: Checksum3 %08x %08x %08x, Checksum %08x %08x %08x", len(a), len(b), len(c), ga, gb, gc, wa, wb, wc)
		}
	})
}

// BenchmarkChecksum3 checks three fragments (1000 bytes: the bench's
// size) with Checksum3 and, as the baseline in the same run, alternating in
// blocks of 100, with three calls of Checksum; it reports both rates in
// GB/s and their ratio.
func BenchmarkChecksum3(b *testing.B) {
	for _, size := range []int{256, 1000, 4096} {
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			buf := make([]byte, 3*size)
			for i := range buf {
				buf[i] = byte(i * 7)
			}
			x, y, z := buf[:size], buf[size:2*size], buf[2*size:]
			var sink uint32
			var three, base time.Duration
			for b.Loop() {
				t0 := time.Now()
				for range 100 {
					p, q, r := Checksum3(x, y, z)
					sink += p ^ q ^ r
				}
				t1 := time.Now()
				for range 100 {
					sink += Checksum(x) ^ Checksum(y) ^ Checksum(z)
				}
				three, base = three+t1.Sub(t0), base+time.Since(t1)
			}
			bytes := float64(b.N) * 100 * 3 * float64(size)
			b.ReportMetric(bytes/three.Seconds()/1e9, "GB/s_checksum3")
			b.ReportMetric(bytes/base.Seconds()/1e9, "GB/s_three_calls")
			b.ReportMetric(base.Seconds()/three.Seconds(), "x_three_calls")
			_ = sink
		})
	}
}
