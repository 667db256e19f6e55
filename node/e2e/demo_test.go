package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/schemas/lhcb"
)

const sampleMDF = "testdata/third_party/lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf"

// demoConfig is configs/demo.yaml with a short loop, a store, ring and
// HTTP port of the test's own, and the test's plugin binaries.
func demoConfig(t *testing.T, loop string) (file, store string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "configs/demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	store = filepath.Join(t.TempDir(), "store")
	text := string(b)
	for old, repl := range map[string]string{
		"loop: 1800":              "loop: " + loop,
		"path: ./data":            "path: " + store,
		"bin/plugins/":            filepath.Join(bin, "plugins") + "/",
		"address: 127.0.0.1:9464": "address: 127.0.0.1:0",
		"shm://sluice-demo":       "shm://" + shmName(t),
		"min_free_bytes: 2GiB":    "min_free_bytes: 256MiB",
		"memory_budget: 512MiB":   "memory_budget: 320MiB",
		"ring_size: 64MiB":        "ring_size: 32MiB",
		"format: auto":            "format: json",
	} {
		if !strings.Contains(text, old) {
			t.Fatalf("configs/demo.yaml no longer contains %q", old)
		}
		text = strings.ReplaceAll(text, old, repl)
	}
	return writeConfig(t, text, nil), store
}

// mdfRecords splits an MDF stream into its records (checksums verified by
// lhcb.DecodeRecord).
func mdfRecords(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for off := 0; off < len(b); {
		rec, n, err := lhcb.DecodeRecord(b[off:])
		if err != nil {
			t.Fatalf("record at offset %d: %v", off, err)
		}
		if rec.Checksum == lhcb.ChecksumBad {
			t.Fatalf("record at offset %d: bad checksum", off)
		}
		out = append(out, b[off:off+n])
		off += n
	}
	return out
}

// odinNumber returns the event number of the first ODIN bank in the MDF
// body and the offset of its payload.
func odinNumber(t *testing.T, body []byte) (uint64, int) {
	t.Helper()
	for at := 0; at < len(body); {
		b, n, err := lhcb.DecodeBank(body[at:])
		if err != nil {
			t.Fatalf("bank at body offset %d: %v", at, err)
		}
		if b.Type == lhcb.BankTypeODIN {
			o, err := lhcb.DecodeODIN(b.Version, b.Data)
			if err != nil {
				t.Fatalf("ODIN bank at body offset %d: %v", at, err)
			}
			return o.EventNumber, at + lhcb.BankHeaderSize
		}
		at += n
	}
	t.Fatal("event without an ODIN bank")
	return 0, 0
}

// TestDemoOnRealMDF runs the demo configuration on the real LHCb sample
// (looped 20 times: 200 events of ~200 kB through the shm ring, gec and a
// prescaled passthrough out of process), checks the ledger, exports the
// stored events to MDF and finds each one byte for byte (so bank by bank)
// among the input events, apart from the ODIN event number, which is unique
// across the loop (the emulator renumbers each pass), then replays the
// deferred events.
func TestDemoOnRealMDF(t *testing.T) {
	file, store := demoConfig(t, "20")
	summary := filepath.Join(t.TempDir(), "run.json")
	out := runOK(t, "run", "--config", file, "--summary-json", summary)
	l := readLedger(t, summary)
	if !l.Balanced || l.EventsBuilt != 200 || l.EventsIncomplete != 0 || l.FragmentsReceived != 200*1239 {
		t.Fatalf("ledger %+v\n%s", l, out)
	}
	if l.EventsStored != l.EventsAccepted+l.EventsDeferred || l.EventsDropped["store_error"]+l.EventsDropped["not_durable"] != 0 ||
		l.EventsStoredAccepted != l.EventsAccepted || l.EventsStoredDeferred != l.EventsDeferred {
		t.Fatalf("stored %d (accepted stream %d, deferred %d) for accepted %d + deferred %d",
			l.EventsStored, l.EventsStoredAccepted, l.EventsStoredDeferred, l.EventsAccepted, l.EventsDeferred)
	}
	// gec cuts the 3 busiest of the 10 sample events (max_bytes 20000 on
	// the SciFi and UT banks), defers 25 %, and hlt1 keeps 1 in 4.
	if l.EventsRejected == 0 || l.EventsAccepted == 0 || l.EventsDeferred < 20 || l.EventsDeferred > 80 {
		t.Fatalf("decisions: accepted %d, rejected %d, deferred %d", l.EventsAccepted, l.EventsRejected, l.EventsDeferred)
	}
	if st := storeStat(t, store); st["accepted"] != l.EventsStoredAccepted || st["deferred"] != l.EventsStoredDeferred {
		t.Fatalf("store stat %v, ledger %d/%d", st, l.EventsStoredAccepted, l.EventsStoredDeferred)
	}

	input, err := os.ReadFile(filepath.Join(repo, sampleMDF))
	if err != nil {
		t.Fatal(err)
	}
	// The sample's events by ODIN event number: the loop's pass k carries
	// them with their numbers shifted by k times the file's span.
	originals := map[uint64][]byte{}
	lo, hi := uint64(1<<64-1), uint64(0)
	for _, r := range mdfRecords(t, input) {
		rec, _, _ := lhcb.DecodeRecord(r)
		n, _ := odinNumber(t, rec.Body)
		originals[n] = r
		lo, hi = min(lo, n), max(hi, n)
	}
	span := hi - lo + 1
	exported := map[uint64]string{} // ODIN event number -> stream
	for _, stream := range []string{"accepted", "deferred"} {
		exp := filepath.Join(t.TempDir(), stream+".mdf")
		runOK(t, "store", "export", "--path", store, "--stream", stream, "--format", "mdf", "--out", exp)
		b, err := os.ReadFile(exp)
		if err != nil {
			t.Fatal(err)
		}
		recs := mdfRecords(t, b)
		want := l.EventsStoredAccepted
		if stream == "deferred" {
			want = l.EventsStoredDeferred
		}
		if uint64(len(recs)) != want {
			t.Fatalf("%s export: %d records, %d events stored", stream, len(recs), want)
		}
		for i, r := range recs {
			// Unique ODIN numbers in the loop's range, and with its ODIN
			// number put back, the record is its input event byte for byte.
			rec, _, _ := lhcb.DecodeRecord(r)
			n, at := odinNumber(t, rec.Body)
			if prev, dup := exported[n]; dup || n < lo || n >= lo+20*span {
				t.Fatalf("%s export: record %d has ODIN event number %d (outside %d..%d, or already exported to %q)", stream, i, n, lo, lo+20*span-1, prev)
			}
			exported[n] = stream
			orig := lo + (n-lo)%span
			body := bytes.Clone(rec.Body)
			binary.LittleEndian.PutUint32(body[at+12:], uint32(orig>>32))
			binary.LittleEndian.PutUint32(body[at+16:], uint32(orig))
			back, err := lhcb.AppendRecord(nil, rec.Header, body, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, originals[orig]) {
				t.Fatalf("%s export: record %d (%d bytes, ODIN event number %d) differs from input event %d beyond its ODIN event number", stream, i, len(r), n, orig)
			}
		}
	}

	// Replay the deferred events with the replay stage (hlt2 = gec).
	rsum := filepath.Join(t.TempDir(), "replay.json")
	runOK(t, "replay", "--config", file, "--summary-json", rsum)
	var rs node.ReplaySummary
	b, _ := os.ReadFile(rsum)
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	if !rs.Balanced || rs.Replayed != l.EventsStoredDeferred || rs.Accepted+rs.Rejected != rs.Replayed || rs.Remaining != 0 || rs.Rejected == 0 {
		t.Fatalf("replay summary %s", b)
	}
	// The replay's memory, in the shape of the run's ledger.memory.
	if m := rs.Memory; m == nil || l.Memory == nil || m.BudgetBytes != l.Memory.BudgetBytes || m.PeakResidentBytes == 0 || len(m.Parts) != 3 ||
		m.Parts[0].Name != "batches" || m.Parts[2].Name != "heap" || m.Parts[2].PeakBytes == 0 ||
		len(l.Memory.Parts) < 5 || m.Parts[2].BoundBytes != l.Memory.Parts[4].BoundBytes || m.Parts[2].BoundBytes >= m.GoMemLimitBytes {
		t.Fatalf("replay summary's memory %s", b)
	}
	if st := storeStat(t, store); st["deferred"] != 0 || st["accepted"] != l.EventsStoredAccepted+rs.Accepted {
		t.Fatalf("after replay: store %v", st)
	}
}

// dashboardMetrics lists the sluice_ metric names the dashboard's queries use.
func dashboardMetrics(dash []byte) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range metricRe.FindAllString(string(dash), -1) {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

var metricRe = regexp.MustCompile(`sluice_[a-z0-9_]+`)

// served reports whether the /metrics text serves metric m (a series, or
// a histogram's family).
func served(metrics, m string) bool {
	return strings.Contains(metrics, "\n"+m) || strings.Contains(metrics, "# TYPE "+strings.TrimSuffix(m, "_bucket"))
}

func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// TestSIGTERMDrains stops a long synthetic run with SIGTERM: exit 0 and a
// balanced ledger. While it runs, /metrics passes promlint and carries
// every metric the Grafana dashboard plots.
func TestSIGTERMDrains(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	file := writeConfig(t, `
run: 21
inputs:
  - uri: shm://{{SHM}}
    emulator: {duration: 5m, packing: 4, fragment_size: {dist: lognormal, mean: 4KiB, sigma: 0.5}, ring_size: 16MiB}
sources:
  - {name: ecal, sources: "0-7"}
  - {name: hcal, sources: "8-11"}
  - {name: muon, sources: "12-15"}
builder: {batch_events: 64}
trigger:
  stages:
    - {name: l0, plugin: {{BIN}}/plugins/l0calo, prescales: {electron: 2}, deferral: {fraction: 0.1}}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`, map[string]string{"SHM": shmName(t), "BIN": bin, "STORE": store})
	summary := filepath.Join(t.TempDir(), "run.json")
	p := start(t, "run", "--config", file, "--summary-json", summary)
	addr := p.httpAddr(t)
	waitStored(t, p, addr, 500)

	resp, err := httpGet("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.New(bytes.NewReader(resp)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("promlint: %s: %s", pr.Metric, pr.Text)
	}
	dash, err := os.ReadFile(filepath.Join(repo, "configs/grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range dashboardMetrics(dash) {
		if strings.HasPrefix(m, "sluice_fill_") {
			continue // this run has no fill source; TestFillAwareDeferral checks these
		}
		if !served(string(resp), m) {
			t.Errorf("the dashboard plots %s, which /metrics does not serve", m)
		}
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, p.log())
	}
	l := readLedger(t, summary)
	if !l.Balanced || l.EventsBuilt < 500 || l.EventsInFlight != 0 || l.EventsUnacked != 0 || l.FragmentsOpen != 0 {
		t.Fatalf("ledger after SIGTERM: %+v", l)
	}
	if st := storeStat(t, store); st["accepted"]+st["deferred"] != l.EventsStored {
		t.Fatalf("store %v, ledger stored %d", st, l.EventsStored)
	}
	if left := pluginProcesses(t); len(left) != 0 {
		t.Fatalf("plugin processes left after the node stopped: %v", left)
	}
}
