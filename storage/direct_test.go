package storage

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestSegmentWrites appends values of odd sizes in writes of 1 to 40
// values, through a staging buffer of three blocks under O_DIRECT (so
// writes fill it many times over and end mid-block: the last block is
// rewritten by the next write) and through the page cache, with rotations
// at a small target size, and reads every value back with its checksum:
// no value may move or be overwritten by a later write's rewrite of the
// last block. After close each file holds exactly its values (a direct
// write's zero fill past the end is cut).
func TestSegmentWrites(t *testing.T) {
	for _, mode := range []struct {
		name  string
		stage int64
	}{{"direct", 3 * dioAlign}, {"page_cache", 0}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			ss, err := openSegments(dir, 256<<10, SyncEveryBatch, mode.stage)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, uint64(mode.stage)))
			type stored struct {
				p   valuePtr
				val []byte
			}
			var all []stored
			ends := map[uint32]int64{}
			usedDirect := false
			for w := 0; w < 300; w++ {
				var parts [][]byte
				var vals [][]byte
				for range 1 + r.IntN(40) {
					v := make([]byte, r.IntN(9000)) // 0 to ~2 blocks, mostly unaligned
					for i := range v {
						v[i] = byte(r.Uint32())
					}
					vals = append(vals, v)
					// A value in two pieces, as Put gives a head and a payload.
					cut := len(v) / 3
					parts = append(parts, v[:cut], v[cut:])
				}
				seg, off, err := ss.appendParts(parts, w%7 == 0)
				if err != nil {
					t.Fatal(err)
				}
				usedDirect = usedDirect || ss.dio != nil
				for _, v := range vals {
					all = append(all, stored{valuePtr{seg: seg, off: off, n: uint32(len(v)), crc: crc32.Checksum(v, castagnoli)}, v})
					off += int64(len(v))
				}
				ends[seg] = off
				ss.indexed(seg)
			}
			if mode.stage > 0 && !usedDirect {
				t.Fatalf("no segment was written with O_DIRECT in %s (its file system refused it?)", dir)
			}
			if len(ends) < 3 {
				t.Fatalf("%d segment files, want several (rotation untested)", len(ends))
			}
			check := func(when string) {
				var buf []byte
				for i, s := range all {
					b, err := ss.read(s.p, buf)
					if err != nil {
						t.Fatalf("%s: value %d (segment %d offset %d, %d bytes): %v", when, i, s.p.seg, s.p.off, s.p.n, err)
					}
					if !bytes.Equal(b, s.val) {
						t.Fatalf("%s: value %d read back different", when, i)
					}
					buf = b
				}
			}
			check("while open")
			if err := ss.close(); err != nil {
				t.Fatal(err)
			}
			for seg, end := range ends {
				st, err := os.Stat(filepath.Join(dir, segName(seg)))
				if err != nil {
					t.Fatal(err)
				}
				if st.Size() != end {
					t.Errorf("segment %d: %d bytes on disk after close, its values end at %d", seg, st.Size(), end)
				}
			}
			check("after close")
		})
	}
}

// TestDirectWrites checks what Store.DirectWrites and the
// sluice_store_direct_writes gauge say: O_DIRECT by default, the page
// cache when store.page_cache asks for it, and from the file system's
// refusal on (here marked, as no file system of the test machines refuses
// O_DIRECT).
func TestDirectWrites(t *testing.T) {
	gauge := func(reg *prometheus.Registry) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "sluice_store_direct_writes" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no sluice_store_direct_writes series")
		return 0
	}
	for _, pageCache := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		s := openTest(t, func(o *Options) { o.PageCache = pageCache; o.Registerer = reg })
		put(t, s, Accepted, genEvents(1, 1, 4, 1, 10_000))
		if got, want := s.DirectWrites(), !pageCache; got != want {
			t.Fatalf("page_cache %v: DirectWrites %v, want %v", pageCache, got, want)
		}
		if got, want := gauge(reg), map[bool]float64{false: 1, true: 0}[pageCache]; got != want {
			t.Fatalf("page_cache %v: gauge %v, want %v", pageCache, got, want)
		}
		if !pageCache {
			s.segs.refused.Store(true)
			if s.DirectWrites() || gauge(reg) != 0 {
				t.Fatalf("after a refusal: DirectWrites %v, gauge %v; want false, 0", s.DirectWrites(), gauge(reg))
			}
		}
	}
}
