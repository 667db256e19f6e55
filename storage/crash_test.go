package storage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
)

// The crash tests run the writer or the replayer as a subprocess: this
// test binary re-executed with childEnv set, which TestMain turns into a
// call of childMain instead of the tests.
const childEnv = "SLUICE_STORAGE_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		if err := childMain(role, os.Getenv("SLUICE_STORAGE_TEST_DIR")); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func childMain(role, dir string) error {
	o := testOptions(dir)
	switch role {
	case "put-batch", "put-interval":
		if role == "put-interval" {
			o.Sync, o.SyncInterval = SyncInterval, 5*time.Millisecond
		}
		s, err := Open(o)
		if err != nil {
			return err
		}
		// Write until killed; report each batch only once it is durable.
		for id := uint64(0); ; id += 8 {
			ack := put(testingStub{}, s, Deferred, genEvents(1, id, 8, 1, 20_000))
			if !ack.Durable {
				if err := s.WaitDurable(context.Background(), ack.Seq); err != nil {
					return err
				}
			}
			fmt.Printf("stored %d %d\n", id, id+7)
		}
	case "replay":
		s, err := Open(o)
		if err != nil {
			return err
		}
		c, err := s.NewCursor(Deferred, CursorOptions{BatchSize: 8})
		if err != nil {
			return err
		}
		for {
			b, err := c.Next()
			if err != nil {
				fmt.Println("done")
				return s.Close()
			}
			_, err = s.Commit(b, replayOutcomes(b.Events))
			b.Release()
			if err != nil {
				return err
			}
			fmt.Println("commit")
		}
	}
	return fmt.Errorf("unknown role %q", role)
}

// replayOutcomes is the deterministic "trigger" of the replay tests:
// accept every event id divisible by 3, reject the others.
func replayOutcomes(ev *schemas.EventBatch) []schemas.Verdict {
	out := make([]schemas.Verdict, ev.Len())
	for i := range out {
		if ev.EventID(i)%3 == 0 {
			out[i] = schemas.Verdict{Decision: schemas.DecisionAccept, Lines: 1 << (ev.EventID(i) % 64), Stage: "hlt2"}
		} else {
			out[i] = schemas.Verdict{Decision: schemas.DecisionReject, Stage: "hlt2"}
		}
	}
	return out
}

// testingStub lets the child use the test helpers: a failure panics,
// which exits the child with a non-zero status and a message.
type testingStub struct{ testing.TB }

func (testingStub) Helper()                      {}
func (testingStub) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }
func (testingStub) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

// child starts this binary in role on dir and returns it with its stdout.
func child(t *testing.T, role, dir string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "SLUICE_STORAGE_TEST_DIR="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out)
}

// TestKillWriter SIGKILLs a writer mid-stream and checks that every event
// it had reported stored is in the reopened store, intact, for the
// every-batch and the interval sync policies.
func TestKillWriter(t *testing.T) {
	for _, role := range []string{"put-batch", "put-interval"} {
		t.Run(role, func(t *testing.T) {
			dir := t.TempDir()
			cmd, sc := child(t, role, dir)
			killAfter := 5 + rand.IntN(20)
			var reported []uint64
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) != 3 || f[0] != "stored" {
					t.Fatalf("child said %q", sc.Text())
				}
				last, _ := strconv.ParseUint(f[2], 10, 64)
				reported = append(reported, last)
				if len(reported) == killAfter {
					cmd.Process.Signal(syscall.SIGKILL)
				}
			}
			err := cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("writer ended with %v before it was killed", err)
			}
			if len(reported) < killAfter {
				t.Fatalf("writer reported %d batches, killed after %d", len(reported), killAfter)
			}
			s, err := Open(testOptions(dir))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			c, _ := s.NewCursor(Deferred, CursorOptions{Mem: mem})
			defer c.Close()
			want := reported[len(reported)-1] + 1
			got := uint64(0)
			for got < want {
				b, err := c.Next()
				if err != nil {
					t.Fatalf("after the kill: events 0..%d reported stored, %d found (%v)", want-1, got, err)
				}
				for i := 0; i < b.Events.Len() && got < want; i++ {
					if err := checkRow(b.Events, b.Verdicts[i], i, genEvent(1, got, 20_000), 0); err != nil {
						t.Fatal(err)
					}
					got++
				}
				b.Release()
			}
			t.Logf("killed after %d reported batches; %d events reported stored, all found", len(reported), want)
		})
	}
}

// TestReplayKilled runs the replay (cursor + Commit) as a subprocess and
// SIGKILLs it at random points 20 times, then lets a last one finish. Every
// deferred event must end in exactly one of accepted (ids divisible by 3)
// or rejected-and-removed, and the ledger, updated in each commit's
// transaction, must count each event once: a commit applied twice or lost
// would show there.
func TestReplayKilled(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	const perRun = 600
	var all []testEvent
	for _, run := range []uint32{10, 11} {
		evs := genEvents(run, 0, perRun, 1, 2000)
		for i := 0; i < perRun; i += 50 {
			put(t, s, Deferred, evs[i:i+50])
		}
		all = append(all, evs...)
	}
	s.Close()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kills, finished := 0, false
	for kills < 20 && !finished {
		cmd, sc := child(t, "replay", dir)
		// Kill just after a random number of commits (often inside the
		// next one), or earlier at a random time (often while opening or
		// recovering the store).
		commits, target := 0, rng.IntN(3)
		var timer *time.Timer
		if rng.IntN(2) == 0 {
			timer = time.AfterFunc(time.Duration(rng.IntN(80_000))*time.Microsecond, func() { cmd.Process.Signal(syscall.SIGKILL) })
		}
		for sc.Scan() {
			switch sc.Text() {
			case "done":
				finished = true
			case "commit":
				commits++
				if commits > target {
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
					cmd.Process.Signal(syscall.SIGKILL)
				}
			}
		}
		if timer != nil {
			timer.Stop()
		}
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signal() == syscall.SIGKILL {
			kills++
		} else if !cmd.ProcessState.Success() {
			t.Fatalf("replay child failed: %v", cmd.ProcessState)
		}
	}
	if kills < 20 {
		t.Fatalf("replay finished after %d kills; the test needs 20 (make the store larger)", kills)
	}
	cmd, sc := child(t, "replay", dir)
	for sc.Scan() {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("final replay: %v", err)
	}

	s, err = Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if left, _ := readAll(t, s, Deferred, CursorOptions{}); len(left) != 0 {
		t.Fatalf("%d events still deferred after the replay, e.g. %+v", len(left), left[0])
	}
	c, _ := s.NewCursor(Accepted, CursorOptions{})
	defer c.Close()
	var wantAcc []testEvent
	for _, e := range all {
		if e.id%3 == 0 {
			e.meta = schemas.Verdict{Decision: schemas.DecisionAccept, Lines: 1 << (e.id % 64), Stage: "hlt2"}
			wantAcc = append(wantAcc, e)
		}
	}
	n := 0
	for {
		b, err := c.Next()
		if err != nil {
			break
		}
		for i := 0; i < b.Events.Len(); i++ {
			if n >= len(wantAcc) {
				t.Fatalf("more accepted events than accepted by replay: run %d event %d", b.Events.Run(i), b.Events.EventID(i))
			}
			if err := checkRow(b.Events, b.Verdicts[i], i, wantAcc[n], schemas.StatusReplayed); err != nil {
				t.Fatal(err)
			}
			n++
		}
		b.Release()
	}
	if n != len(wantAcc) {
		t.Fatalf("%d accepted events, want %d", n, len(wantAcc))
	}
	led, err := s.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if led.Accepted != uint64(len(wantAcc)) || led.Rejected != uint64(len(all)-len(wantAcc)) || led.Kept != 0 {
		t.Fatalf("ledger %+v, want %d accepted, %d rejected: some commit applied twice or lost", led, len(wantAcc), len(all)-len(wantAcc))
	}
	t.Logf("%d kills; %d accepted, %d rejected, each exactly once", kills, led.Accepted, led.Rejected)
}

// TestReadOnlyAfterKill opens a store read-only (as `sluice store stat`
// does) after its writer was killed: refused with ErrNeedsRecovery, then
// recovered by a read-write open, after which read-only works and finds
// every event reported stored.
func TestReadOnlyAfterKill(t *testing.T) {
	dir := t.TempDir()
	cmd, sc := child(t, "put-batch", dir)
	var last uint64
	for n := 0; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		last, _ = strconv.ParseUint(f[2], 10, 64)
		if n == 3 {
			cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	cmd.Wait()
	o := testOptions(dir)
	o.ReadOnly = true
	if _, err := Open(o); !errors.Is(err, ErrNeedsRecovery) {
		t.Fatalf("read-only open after a kill: %v, want ErrNeedsRecovery", err)
	}
	rw, err := Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	rw.Close()
	s, err := Open(o)
	if err != nil {
		t.Fatalf("read-only open after recovery: %v", err)
	}
	defer s.Close()
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Streams[1].Events; got < last+1 {
		t.Fatalf("read-only stats: %d deferred events, %d were reported stored", got, last+1)
	}
}
