package shm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/sluice-daq/sluice/node/transport"
)

// testPacket is packet i of a test stream: its index, then bytes derived
// from it, of a length that varies so records wrap at every offset.
func testPacket(dst []byte, i int, maxLen int) []byte {
	n := 8 + (i*37)%(maxLen-8)
	dst = binary.LittleEndian.AppendUint64(dst[:0], uint64(i))
	for j := 8; j < n; j++ {
		dst = append(dst, byte(i+j))
	}
	return dst
}

func TestRingWrapAroundOutOfOrderRelease(t *testing.T) {
	name := ringName(t)
	// 8 KiB: room for the 4 held records of <= 768 bytes, a wrap-around
	// skip and the next record.
	w, r := openRing(t, name, 8192)
	const packets = 3000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	werr := make(chan error, 1)
	writerDone := make(chan struct{})
	defer func() { cancel(); <-writerDone }()
	go func() {
		defer close(writerDone)
		var buf []byte
		for i := range packets {
			buf = testPacket(buf, i, 700)
			if err := w.Write(ctx, buf); err != nil {
				werr <- err
				return
			}
		}
		werr <- w.Drain(ctx)
	}()
	// Hold groups of 4 packets and release them in random order: the ack must
	// still advance only over the released prefix, and the writer must
	// never overwrite a held packet (its bytes are re-checked on release).
	rng := rand.New(rand.NewPCG(1, 2))
	type held struct {
		i       int
		b       []byte
		release func()
	}
	var hold []held
	var want []byte
	check := func(h held) {
		want = testPacket(want, h.i, 700)
		if !bytes.Equal(h.b, want) {
			t.Fatalf("packet %d: content changed or wrong (len %d, want %d)", h.i, len(h.b), len(want))
		}
	}
	for i := range packets {
		p, release, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		hold = append(hold, held{i, p, release})
		check(hold[len(hold)-1])
		if len(hold) < 4 && i < packets-1 {
			continue
		}
		// Release the whole group: a consumer that kept its oldest packet
		// forever would (rightly) stall the ring.
		for len(hold) > 0 {
			k := rng.IntN(len(hold))
			check(hold[k])
			hold[k].release()
			hold[k].release() // idempotent
			hold = append(hold[:k], hold[k+1:]...)
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if n := r.Unacknowledged(); n != 0 {
		t.Fatalf("%d records unacknowledged after every release", n)
	}
	if w.ThrottleNs() == 0 {
		t.Fatal("a 4 KiB ring carrying 1 MB never throttled the writer")
	}
	w.Close()
	if _, _, err := r.Next(ctx); err != io.EOF {
		t.Fatalf("after writer Close: %v, want io.EOF", err)
	}
}

func TestRingFullWriterWaitsAndNeverOverwrites(t *testing.T) {
	name := ringName(t)
	w, r := openRing(t, name, MinRingData)
	first := bytes.Repeat([]byte{0xAB}, 1000)
	ctx := context.Background()
	if err := w.Write(ctx, first); err != nil {
		t.Fatal(err)
	}
	p, release, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Fill the ring behind the held packet until the writer must wait.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	filler := bytes.Repeat([]byte{0xCD}, 1000)
	for err = nil; err == nil; {
		err = w.Write(short, filler)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("full ring: %v, want the writer to wait until its deadline", err)
	}
	if !bytes.Equal(p, first) {
		t.Fatal("writer overwrote an unacknowledged packet")
	}
	if w.ThrottleNs() < uint64(50*time.Millisecond) {
		t.Fatalf("throttle %d ns, want about the 100 ms waited", w.ThrottleNs())
	}
	release()
	if err := w.Write(ctx, filler); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

func TestRingReaderRestartRereadsUnacknowledged(t *testing.T) {
	name := ringName(t)
	w, err := CreateWriter(name, WriterConfig{DataSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	var buf []byte
	for i := range 10 {
		if err := w.Write(ctx, testPacket(buf, i, 300)); err != nil {
			t.Fatal(err)
		}
	}
	r1, err := OpenReader(name, ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReader(name, ReaderConfig{}); !errors.Is(err, ErrReaderAttached) {
		t.Fatalf("second reader: %v, want ErrReaderAttached", err)
	}
	var rel []func()
	for range 6 {
		_, release, err := r1.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rel = append(rel, release)
	}
	for _, i := range []int{0, 1, 2, 4} { // 3 stays unreleased: ack stops after 2
		rel[i]()
	}
	r1.Close()
	rel[3]() // after Close: does nothing
	r2, err := OpenReader(name, ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for want := 3; want < 10; want++ {
		p, release, err := r2.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := int(binary.LittleEndian.Uint64(p)); got != want {
			t.Fatalf("restarted reader read packet %d, want %d", got, want)
		}
		release()
	}
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) uint32 {
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	return uint32(c.Process.Pid)
}

func TestRingDetectsDeadOrStalePeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t.Run("writer pid gone", func(t *testing.T) {
		name := ringName(t)
		w, err := CreateWriter(name, WriterConfig{DataSize: MinRingData})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.Write(ctx, []byte("last words")); err != nil {
			t.Fatal(err)
		}
		r, err := OpenReader(name, ReaderConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		w.m.u32(offWriterPID).Store(deadPID(t))
		// Complete packets written before the crash are still delivered.
		if p, _, err := r.Next(ctx); err != nil || string(p) != "last words" {
			t.Fatalf("packet before crash: %q, %v", p, err)
		}
		if _, _, err := r.Next(ctx); !errors.Is(err, ErrWriterDead) || !strings.Contains(err.Error(), "exited") {
			t.Fatalf("after writer death: %v, want ErrWriterDead naming the exit", err)
		}
	})
	t.Run("writer heartbeat stale", func(t *testing.T) {
		name := ringName(t)
		w, err := CreateWriter(name, WriterConfig{DataSize: MinRingData, HeartbeatInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		r, err := OpenReader(name, ReaderConfig{StaleAfter: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, _, err := r.Next(ctx); !errors.Is(err, ErrWriterDead) || !strings.Contains(err.Error(), "heartbeat") {
			t.Fatalf("stale writer: %v, want ErrWriterDead naming the heartbeat", err)
		}
	})
	t.Run("reader pid gone while writer waits", func(t *testing.T) {
		name := ringName(t)
		w, err := CreateWriter(name, WriterConfig{DataSize: MinRingData, ReaderGrace: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		r, err := OpenReader(name, ReaderConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		w.m.u32(offReaderPID).Store(deadPID(t))
		for err = nil; err == nil; {
			err = w.Write(ctx, make([]byte, 1000))
		}
		if !errors.Is(err, ErrReaderDead) {
			t.Fatalf("writer with dead reader: %v, want ErrReaderDead", err)
		}
	})
}

// A writer waiting on a full ring whose reader died carries on when a new
// reader attaches within the grace period; the new reader rereads what
// the dead one had not acknowledged.
func TestRingWriterSurvivesReaderRestart(t *testing.T) {
	name := ringName(t)
	w, err := CreateWriter(name, WriterConfig{DataSize: MinRingData, ReaderGrace: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r1, err := OpenReader(name, ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	packet := func(i int) []byte { return binary.LittleEndian.AppendUint64(make([]byte, 0, 1000), uint64(i))[:1000] }
	for i := range 3 { // 3 records of 1088 bytes: the 4th does not fit
		if err := w.Write(ctx, packet(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := r1.Next(ctx); err != nil { // read, never acknowledged
		t.Fatal(err)
	}
	// The reader "crashes": its pid is now that of an exited process.
	w.m.u32(offReaderPID).Store(deadPID(t))
	werr := make(chan error, 1)
	go func() { werr <- w.Write(ctx, packet(3)) }()
	time.Sleep(3 * pollInterval) // the writer sees the dead reader and waits
	r2, err := OpenReader(name, ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for want := 0; want < 4; want++ {
		p, release, err := r2.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := int(binary.LittleEndian.Uint64(p)); got != want {
			t.Fatalf("new reader read packet %d, want %d", got, want)
		}
		release()
	}
	if err := <-werr; err != nil {
		t.Fatalf("writer: %v, want it to carry on with the new reader", err)
	}
}

func TestRingRejectsBadFiles(t *testing.T) {
	name := ringName(t)
	path := filepath.Join(Dir, name)
	if _, err := OpenReader(name, ReaderConfig{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing ring: %v, want ErrNotExist", err)
	}
	for _, tc := range []struct {
		what string
		file []byte
	}{
		{"too small", make([]byte, 100)},
		{"zero magic", make([]byte, controlSize+MinRingData)},
	} {
		if err := os.WriteFile(path, tc.file, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenReader(name, ReaderConfig{}); !errors.Is(err, ErrBadRing) {
			t.Fatalf("%s: %v, want ErrBadRing", tc.what, err)
		}
	}
	for _, bad := range []string{"", "a/b", "..", "x\x00"} {
		if _, err := OpenReader(bad, ReaderConfig{}); !errors.Is(err, transport.ErrBadURI) {
			t.Fatalf("name %q: %v, want ErrBadURI", bad, err)
		}
	}
	if _, err := CreateWriter(name, WriterConfig{DataSize: 5000}); err == nil {
		t.Fatal("data size 5000 (not a power of two) accepted")
	}
}

func TestRingCorruptRecordHeader(t *testing.T) {
	name := ringName(t)
	w, r := openRing(t, name, MinRingData)
	ctx := context.Background()
	if err := w.Write(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(w.m.data[0:], 1<<30) // length past the region
	if _, _, err := r.Next(ctx); !errors.Is(err, ErrBadRing) {
		t.Fatalf("corrupt length: %v, want ErrBadRing", err)
	}
}

// TestRingSidesNeverSleepInFutex: a Reader waiting for data and a Writer
// waiting for space park on Go's timer (a thread asleep in futex(2) would
// keep a Go P from the node's other goroutines): their *_waiting flags stay
// 0 while they wait, and each still sees its peer's progress.
func TestRingSidesNeverSleepInFutex(t *testing.T) {
	name := ringName(t)
	w, r := openRing(t, name, MinRingData)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// flagRaised samples a waiting flag while a side waits for 50 ms.
	flagRaised := func(off int, waiting func() bool) bool {
		for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end) && waiting(); {
			if w.m.u32(off).Load() != 0 {
				return true
			}
			time.Sleep(100 * time.Microsecond)
		}
		return false
	}

	got := make(chan []byte, 1)
	go func() {
		p, release, err := r.Next(ctx)
		if err != nil {
			t.Error(err)
			got <- nil
			return
		}
		got <- append([]byte(nil), p...)
		release()
	}()
	if flagRaised(offReaderWait, func() bool { return true }) {
		t.Error("a reader waiting for data raised reader_waiting (it sleeps in futex)")
	}
	if err := w.Write(ctx, []byte("packet")); err != nil {
		t.Fatal(err)
	}
	if p := <-got; string(p) != "packet" {
		t.Fatalf("reader got %q, want the packet written while it waited", p)
	}

	// Fill the ring behind a held packet, then wait for space.
	if err := w.Write(ctx, []byte("held")); err != nil {
		t.Fatal(err)
	}
	_, release, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	filler := make([]byte, 1000)
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	fillers := 0
	for err = nil; err == nil; fillers++ {
		err = w.Write(short, filler)
	}
	fillers-- // the last one timed out
	stop()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("filling the ring: %v", err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- w.Write(ctx, filler) }()
	if flagRaised(offWriterWait, func() bool { return len(wrote) == 0 }) {
		t.Error("a writer waiting for space raised writer_waiting (it sleeps in futex)")
	}
	release()
	for range fillers + 1 { // the last: what the writer waited to write
		_, rel, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rel()
	}
	if err := <-wrote; err != nil {
		t.Fatalf("writer waiting for space: %v", err)
	}
}

// TestRingMappingsPopulated: both sides' mappings of a ring larger than
// one populate chunk have every page mapped at creation (the kernel's Rss
// of the mapping is its size), so the data path takes no page faults.
func TestRingMappingsPopulated(t *testing.T) {
	name := ringName(t)
	const data = 4 * populateChunk
	w, r := openRing(t, name, data)
	for side, mem := range map[string][]byte{"writer": w.m.mem, "reader": r.m.mem} {
		rss, err := mappingRss(mem)
		if err != nil {
			t.Fatal(err)
		}
		if rss != int64(len(mem)) {
			t.Errorf("%s: %d bytes of its %d-byte mapping resident, want all", side, rss, len(mem))
		}
	}
}

// mappingRss is the Rss /proc/self/smaps reports for the mapping that
// starts at mem's first byte.
func mappingRss(mem []byte) (int64, error) {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&mem[0])))
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, start) {
			in = true
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimPrefix(line, "Rss:"), "%d kB", &kb); err != nil {
				return 0, fmt.Errorf("smaps %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no mapping at %s in /proc/self/smaps", start)
}
