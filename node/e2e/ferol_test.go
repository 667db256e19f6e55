package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/internal/samples"
	"github.com/sluice-daq/sluice/schemas/cms"
)

const ferolInputConfig = `
inputs:
  - uri: tcp://127.0.0.1:0?framing=ferol
    expect_streams: 1
sources:
  - {name: fed, sources: "931"}
builder: {timeout: 2s}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`

// TestFEROLReadout: a node whose TCP input takes FEROL framing receives
// each real CMS capture from a separate `sluice readout --from CAPTURE
// --to tcp://...?framing=ferol` process, which sends the capture's bytes
// as the FEROL sent them (one run per capture: both hold FED 931, events
// 1..300). The node builds one event per (FED, event number), stores them
// all (deferred: it has no online trigger stage) and ends once the stream
// closed, its ledger balanced, the input's bytes the capture's. Exported from
// the store, the events give back the capture byte for byte as a FEROL
// stream (--format ferol), and as FRD events (--format frd) whose data is
// each original FED fragment, byte for byte.
func TestFEROLReadout(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	cfgFile := writeConfig(t, ferolInputConfig, map[string]string{"STORE": store})
	for i, name := range []string{"mol_run55.dat.gz", "mol_run2.dat.gz"} {
		run := fmt.Sprint(101 + i)
		t.Run(name, func(t *testing.T) {
			capture := filepath.Join("testdata", "third_party", "cms", name)
			want := samples.Read(t, "cms/"+name)
			summary := filepath.Join(t.TempDir(), "run.json")
			node := start(t, "run", "--config", cfgFile, "--run", run, "--summary-json", summary)
			addr := node.listenAddr(t)
			ro := start(t, "readout", "--from", capture, "--to", "tcp://"+addr+"?framing=ferol", "--rate", "2000")
			if code := ro.wait(t, time.Minute); code != 0 {
				t.Fatalf("sluice readout: exit %d\n%s\n%s", code, ro.stdout.String(), ro.log())
			}
			if code := node.wait(t, time.Minute); code != 0 {
				t.Fatalf("sluice run: exit %d once its FEROL stream closed\n%s", code, node.log())
			}
			l := readLedger(t, summary)
			if !l.Balanced || l.EventsBuilt != 300 || l.EventsIncomplete != 0 || l.EventsStored != 300 || l.FragmentsReceived != 300 || l.InputBytes != uint64(len(want)) || l.EventsStoredDeferred != 300 {
				t.Fatalf("ledger %+v", l)
			}

			ferol := filepath.Join(t.TempDir(), "out.ferol")
			runOK(t, "store", "export", "--path", store, "--stream", "deferred", "--runs", run, "--format", "ferol", "--out", ferol)
			if got, err := os.ReadFile(ferol); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("FEROL export: %d bytes, want the %d bytes of %s (%v)", len(got), len(want), name, err)
			}

			frd := filepath.Join(t.TempDir(), "out.frd")
			runOK(t, "store", "export", "--path", store, "--stream", "deferred", "--runs", run, "--format", "frd", "--out", frd)
			got, err := os.ReadFile(frd)
			if err != nil {
				t.Fatal(err)
			}
			fr := cms.NewFEROLReader(bytes.NewReader(want))
			for ev := uint64(1); ; ev++ {
				f, err := fr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				e, n, err := cms.DecodeFRD(got)
				if err != nil || e.Event != ev || e.Run != uint32(101+i) || e.Version != cms.BareFRDVersion || !bytes.Equal(e.Data, f.Data) {
					t.Fatalf("FRD event %d: %+v (%v), want run %s and the capture's FED fragment", ev, e, err, run)
				}
				got = got[n:]
			}
			if len(got) != 0 {
				t.Fatalf("%d bytes after the 300 FRD events", len(got))
			}
		})
	}
}

// TestFEROLFlaggedInSummary: FED fragments whose CRC-16 the node's FEROL
// input finds bad (a readout corrupting some, --corrupt) are kept and
// flagged; the end-of-run summary shows them under their reason, and the
// events holding them, as the input's counters do (it said "corrupt 0"
// and nothing else).
func TestFEROLFlaggedInSummary(t *testing.T) {
	cfgFile := writeConfig(t, ferolInputConfig, map[string]string{"STORE": filepath.Join(t.TempDir(), "store")})
	summary, sent := filepath.Join(t.TempDir(), "run.json"), filepath.Join(t.TempDir(), "sent.json")
	node := start(t, "run", "--config", cfgFile, "--summary-json", summary)
	addr := node.listenAddr(t)
	runOK(t, "readout", "--from", filepath.Join("testdata", "third_party", "cms", "mol_run55.dat.gz"), "--to", "tcp://"+addr+"?framing=ferol",
		"--corrupt", "0.05", "--summary-json", sent)
	if code := node.wait(t, time.Minute); code != 0 {
		t.Fatalf("sluice run: exit %d\n%s", code, node.log())
	}
	var s struct {
		Faults map[string]uint64 `json:"faults"`
	}
	if err := json.Unmarshal([]byte(readFile(t, sent)), &s); err != nil {
		t.Fatal(err)
	}
	bad := s.Faults["corrupt"]
	l := readLedger(t, summary)
	key := "tcp://127.0.0.1:0?framing=ferol/fed_crc" // the input as configured
	if bad == 0 || l.FragmentsFlagged[key] != bad || len(l.FragmentsFlagged) != 1 || l.EventsSourceError != bad || !l.Balanced || l.EventsBuilt != 300 {
		t.Fatalf("%d corrupted; ledger flagged %v, events with a source error %d", bad, l.FragmentsFlagged, l.EventsSourceError)
	}
	out := node.stdout.String()
	for _, label := range []string{"flagged by the inputs (kept in their events)", key, "with a source error (a fragment flagged)"} {
		if !regexp.MustCompile(regexp.QuoteMeta(label) + `\s+` + fmt.Sprint(bad) + `\s`).MatchString(out) {
			t.Errorf("the summary lacks %q %d:\n%s", label, bad, out)
		}
	}
}
