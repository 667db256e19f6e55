package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/plugins/sdk/scaffold"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// TestPluginNewBuildsAndChecks builds sluice, has it write a plugin project
// with the sluice checkout detected from its sources, and runs the project's
// make test and make check offline (module cache only) with no sluice on
// PATH: the Makefile must name the binary that wrote it. Then it checks the
// built plugin in process and reads the decisions.
func TestPluginNewBuildsAndChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sluice and a plugin project")
	}
	tmp := t.TempDir()
	sluice := filepath.Join(tmp, "tools", "sluice")
	if b, err := exec.Command("go", "build", "-o", sluice, ".").CombinedOutput(); err != nil {
		t.Fatalf("building sluice: %v\n%s", err, b)
	}
	dir := filepath.Join(tmp, "demo")
	b, err := exec.Command(sluice, "plugin", "new", "demo", "--dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("sluice plugin new: %v\n%s", err, b)
	}
	root, _ := filepath.Abs("../..")
	if !strings.Contains(string(b), "sluice checkout "+root) {
		t.Fatalf("detected checkout: %s, want %s", b, root)
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	// Relative to the project where they share a directory, so that both
	// may move together (scaffold's tests check the rule).
	rel, _ := scaffold.ReplacePath(dir, root)
	if !strings.Contains(string(gomod), "replace github.com/sluice-daq/sluice => "+rel+"\n") {
		t.Fatalf("go.mod lacks the replace directive:\n%s", gomod)
	}
	for _, f := range []string{"main.go", "main_test.go", "Makefile", "README.md", "go.sum"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	makefile, _ := os.ReadFile(filepath.Join(dir, "Makefile"))
	if !strings.Contains(string(makefile), "\nSLUICE ?= "+sluice+"\n") {
		t.Fatalf("Makefile does not default SLUICE to %s:\n%s", sluice, makefile)
	}

	// Only go's and make's directories on PATH: no sluice there.
	var path []string
	for _, tool := range []string{"go", "make"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
		d := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(d, "sluice")); err == nil {
			t.Fatalf("%s holds a sluice: the test needs a PATH without one", d)
		}
		path = append(path, d)
	}
	env := append(os.Environ(), "PATH="+strings.Join(path, string(os.PathListSeparator)), "GOFLAGS=-mod=mod", "GOPROXY=off")
	runMake := func(args ...string) string {
		cmd := exec.Command("make", args...)
		cmd.Dir, cmd.Env = dir, env
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %v in the new project: %v\n%s", args, err, b)
		}
		return string(b)
	}
	runMake("test")
	if out := runMake("check"); !strings.Contains(out, "handshake ok") || !strings.Contains(out, "16 events:") {
		t.Fatalf("make check:\n%s", out)
	}
	if out := runMake("-n", "check", "SLUICE=/elsewhere/sluice"); !strings.Contains(out, "/elsewhere/sluice plugin check bin/demo") {
		t.Fatalf("SLUICE is not overridable:\n%s", out)
	}

	bin := filepath.Join(dir, "bin", "demo")
	out, err := run(t, "plugin", "check", bin)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"name     demo", "lines    big", "handshake ok"} {
		if !strings.Contains(out, want) {
			t.Fatalf("check output lacks %q:\n%s", want, out)
		}
	}
	// The template defers corrupt events and accepts the others above
	// min_bytes=500 payload bytes: every row must follow, and the events
	// must exercise all three decisions.
	rows := checkRows(t, out)
	count := map[string]int{}
	for _, r := range rows {
		want := "reject"
		switch {
		case strings.Contains(r.status, "corrupt"):
			want = "defer"
		case r.bytes > 500:
			want = "accept"
		}
		if r.decision != want {
			t.Errorf("event %d (%d bytes, %s): %s, want %s", r.id, r.bytes, r.status, r.decision, want)
		}
		count[r.decision]++
	}
	if len(rows) != 16 || count["accept"] == 0 || count["reject"] == 0 || count["defer"] == 0 {
		t.Fatalf("decisions %v on %d events, want all three on 16:\n%s", count, len(rows), out)
	}
	summary := "16 events: " + strconv.Itoa(count["accept"]) + " accept, " + strconv.Itoa(count["reject"]) + " reject, " + strconv.Itoa(count["defer"]) + " defer"
	if !strings.Contains(out, summary) {
		t.Fatalf("check output lacks %q:\n%s", summary, out)
	}

	out, err = run(t, "plugin", "check", bin, "--param", "min_bytes=100000", "--inline", "--events", "8")
	if err != nil || !strings.Contains(out, "8 events: 0 accept, 7 reject, 1 defer") {
		t.Fatalf("check with min_bytes=100000: %v\n%s", err, out)
	}
	if _, err := run(t, "plugin", "check", bin, "--param", "min_byte=1"); err == nil || !strings.Contains(err.Error(), "min_byte") {
		t.Fatalf("misspelt parameter: %v", err)
	}
	if _, err := run(t, "plugin", "new", "demo", "--dir", dir); err == nil {
		t.Fatal("plugin new overwrote an existing directory")
	}
}

// checkRow is one event line of plugin check's table.
type checkRow struct {
	id       uint64
	bytes    int
	status   string
	decision string
}

// checkRows parses the event table of plugin check's output.
func checkRows(t *testing.T, out string) []checkRow {
	t.Helper()
	var rows []checkRow
	re := regexp.MustCompile(`(?m)^(\d+) +(\d+) (\S+) +(accept|reject|defer)\b`)
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		id, _ := strconv.ParseUint(m[1], 10, 64)
		n, _ := strconv.Atoi(m[2])
		rows = append(rows, checkRow{id: id, bytes: n, status: m[3], decision: m[4]})
	}
	return rows
}

// TestPluginCheckEvents: the synthetic events of plugin check vary in size
// (deterministically per seed) over the documented range and carry corrupt
// and incomplete events at the documented places.
func TestPluginCheckEvents(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sizes := func(seed uint64) []int {
		batches, err := checkEvents(mem, 32, seed)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, b := range batches {
				b.Release()
			}
		}()
		var out []int
		for _, rec := range batches {
			ev, err := schemas.NewEventBatch(rec)
			if err != nil {
				t.Fatal(err)
			}
			for i := range ev.Len() {
				k := len(out)
				if ev.EventID(i) != uint64(k+1) {
					t.Fatalf("row %d: event id %d", k, ev.EventID(i))
				}
				wantCorrupt, wantIncomplete := k%8 == 3, k%8 == 6
				st := ev.Status(i)
				if (st&schemas.StatusCorrupt != 0) != wantCorrupt || (st&schemas.StatusIncomplete != 0) != wantIncomplete {
					t.Fatalf("event %d: status %b", ev.EventID(i), st)
				}
				if wantCorrupt && !slices.Equal(ev.CorruptSources(i), []uint32{0x100}) {
					t.Fatalf("event %d: corrupt sources %x", ev.EventID(i), ev.CorruptSources(i))
				}
				if wantIncomplete && !slices.Equal(ev.MissingSources(i), []uint32{0x300}) {
					t.Fatalf("event %d: missing sources %x", ev.EventID(i), ev.MissingSources(i))
				}
				n := 0
				ev.EachFragment(i, func(_ uint32, p []byte) bool { n += len(p); return true })
				out = append(out, n)
			}
		}
		return out
	}
	a := sizes(1)
	if len(a) != 32 {
		t.Fatalf("%d events, want 32", len(a))
	}
	if !slices.Equal(a, sizes(1)) {
		t.Fatal("the same seed gave other sizes")
	}
	if slices.Equal(a, sizes(2)) {
		t.Fatal("another seed gave the same sizes")
	}
	// Ten sources of 8 to 1.5×256 bytes; the spread must straddle the
	// template's 500 bytes by far on both sides.
	lo, hi := slices.Min(a), slices.Max(a)
	if lo < 9*8 || hi > 10*checkMaxFragment*3/2 || lo > 300 || hi < 1200 {
		t.Fatalf("event sizes %d…%d: %v", lo, hi, a)
	}
}

// TestPluginCheckRefusesNonPlugins: a program that is not a plugin and a
// plugin of another protocol version give errors naming the binary; a
// directory or a file without execute permission is refused before it is
// started, with the binary to pass instead; the plugin's log lines carry the
// stage label "check".
func TestPluginCheckRefusesNonPlugins(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "../../plugins/internal/testplugins/wrongproto", "../../plugins/internal/testplugins/notplugin")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for _, c := range []struct{ name, says string }{
		{"notplugin", `wrote to standard output before serving; go-plugin uses stdout for its handshake (first bytes: "hello, I am not a plugin\n")`},
		{"wrongproto", "another trigger protocol version"},
	} {
		path := filepath.Join(bin, c.name)
		out, err := run(t, "plugin", "check", path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", c.name, err)
		}
		// Every log line (the wrongproto process killed, say) is labelled;
		// a start-up failure itself logs no misleading warning.
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "time=") && !strings.Contains(line, "stage=check") {
				t.Errorf("%s: log line without the stage label check: %s", c.name, line)
			}
		}
		if strings.Contains(out, "failed to exit gracefully") {
			t.Errorf("%s: misleading warning:\n%s", c.name, out)
		}
	}

	// A project as plugin new writes it, not built yet.
	proj := filepath.Join(t.TempDir(), "mytrigger")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, text := range map[string]string{"go.mod": "module mytrigger\n\ngo 1.26.0\n", "main.go": "package main\n"} {
		if err := os.WriteFile(filepath.Join(proj, f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := filepath.Join(proj, "bin", "mytrigger")
	for _, c := range []struct{ arg, says string }{
		{proj, proj + " is a directory; build it (make build) and pass the binary, e.g. " + want + " (not built yet)"},
		{filepath.Join(proj, "main.go"), "main.go is not executable (mode -rw-r--r--); build the project (make build) and pass the binary, e.g. " + want},
		{bin, bin + " is a directory; pass the plugin binary"},
	} {
		_, err := run(t, "plugin", "check", c.arg)
		if err == nil || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "fork/exec") {
			t.Errorf("check %s: %v, want %q", c.arg, err, c.says)
		}
	}

	if _, err := run(t, "plugin", "new", "Bad-Name"); err == nil {
		t.Error("plugin new accepted a name that is not a Go identifier")
	}
	if _, err := run(t, "plugin", "new", "x", "--sluice-dir", bin); err == nil || !strings.Contains(err.Error(), "no go.mod") {
		t.Errorf("--sluice-dir without a checkout: %v", err)
	}
}

// TestPluginCheckPrintsNegotiatedProtocol: plugin check prints the
// handshake version the plugin settled on, not the host's base version: 2
// (pipelined) for a plugin built with the SDK, 1 for one that speaks only
// version 1.
func TestPluginCheckPrintsNegotiatedProtocol(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "../../plugins/examples/passthrough", "../../plugins/internal/testplugins/v1only")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for _, c := range []struct{ name, want string }{
		{"passthrough", "\nprotocol sluice.trigger.v1, handshake version 2 (pipelined: a node with an arena sends up to 2 calls at once) (handshake ok)\n"},
		{"v1only", "\nprotocol sluice.trigger.v1, handshake version 1 (one call at a time) (handshake ok)\n"},
	} {
		// v1only decodes inline batches only.
		out, err := run(t, "plugin", "check", "--inline", "--events", "4", filepath.Join(bin, c.name))
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out)
		}
		if !strings.Contains(out, c.want) || !strings.Contains(out, "4 events:") {
			t.Errorf("%s: want %q in\n%s", c.name, c.want, out)
		}
	}
}

// TestPluginCheckRealEvents: plugin check decides the events of a file of
// any format sluice splits (--from, gzipped too) or of a store (--store),
// at most --events of them, and warns when the plugin reads source groups
// the events do not have.
func TestPluginCheckRealEvents(t *testing.T) {
	bin := t.TempDir()
	if b, err := exec.Command("go", "build", "-o", bin+"/", "../../plugins/examples/passthrough", "../../plugins/examples/l0calo").CombinedOutput(); err != nil {
		t.Fatalf("building the example plugins: %v\n%s", err, b)
	}
	pass, l0 := filepath.Join(bin, "passthrough"), filepath.Join(bin, "l0calo")
	third := filepath.Join("..", "..", "testdata", "third_party")
	mdf := filepath.Join(third, "lhcb", "MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf")
	for _, c := range []struct {
		file   string
		args   []string
		events int
	}{
		{mdf, nil, 10},
		{filepath.Join(third, "cms", "mol_run55.dat.gz"), []string{"--events", "5"}, 5},
		{filepath.Join(third, "besiii", "test_raw_data.raw"), nil, 10},
	} {
		out, err := run(t, append([]string{"plugin", "check", pass, "--from", c.file}, c.args...)...)
		if err != nil {
			t.Fatalf("--from %s: %v\n%s", c.file, err, out)
		}
		if rows := checkRows(t, out); len(rows) != c.events || !strings.Contains(out, fmt.Sprintf("\n%d events: ", c.events)) {
			t.Fatalf("--from %s: %d rows, want %d:\n%s", c.file, len(rows), c.events, out)
		}
		if strings.Contains(out, "warning:") {
			t.Fatalf("passthrough reads every group, yet a warning:\n%s", out)
		}
	}
	// l0calo reads the emulator's ecal, hcal and muon groups: LHCb data
	// has none of them.
	out, err := run(t, "plugin", "check", l0, "--from", mdf)
	if err != nil || !strings.Contains(out, "warning: the plugin reads source groups ecal, hcal, muon, which these events do not have (they have bank") {
		t.Fatalf("l0calo on LHCb events: %v\n%s", err, out)
	}
	// A store's events.
	dir := t.TempDir()
	writeStore(t, dir, schemas.SourceGroup{Name: "det", Sources: []uint32{4, 5}}, storage.Deferred, smallRows(3, 0, 7), schemas.DecisionDefer)
	out, err = run(t, "plugin", "check", pass, "--store", dir, "--stream", "deferred", "--events", "5")
	if err != nil || len(checkRows(t, out)) != 5 || !strings.Contains(out, "\n5 events: ") {
		t.Fatalf("--store: %v\n%s", err, out)
	}
	if out, err := run(t, "plugin", "check", pass, "--store", dir); err == nil || !strings.Contains(err.Error(), "holds no events") {
		t.Fatalf("--store of an empty stream: %v\n%s", err, out)
	}
	if _, err := run(t, "plugin", "check", pass, "--store", dir, "--from", mdf); exitCode(err) != exitConfig {
		t.Fatalf("--store with --from: %v", err)
	}
}

// TestPluginDiff: plugin diff of passthrough against passthrough with
// prescale=3 (accepting only ids divisible by 3) on 90 synthetic events
// (ids 1..90): 30 agree, 60 differ accept -> reject on line all, and the
// listed events are the first differing ids; the same plugin twice on the
// events of a file agrees everywhere.
func TestPluginDiff(t *testing.T) {
	bin := t.TempDir()
	if b, err := exec.Command("go", "build", "-o", bin+"/", "../../plugins/examples/passthrough").CombinedOutput(); err != nil {
		t.Fatalf("building the example plugin: %v\n%s", err, b)
	}
	pass := filepath.Join(bin, "passthrough")
	out, err := run(t, "plugin", "diff", pass, pass, "--param-b", "prescale=3", "--events", "90", "--show", "4")
	if err != nil {
		t.Fatalf("plugin diff: %v\n%s", err, out)
	}
	for _, want := range []string{
		"\n90 events of the synthetic batch: 30 agreeing, 60 differing (66.67%)\n",
		"\n  accept  reject  60\n",
		"\n  all   60      0\n",
		"\nfirst 4 differing events:\n",
		"\n  1         accept  all      reject  -\n",
		"\n  5         accept  all      reject  -\n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("plugin diff output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\n  7 ") {
		t.Fatalf("more than --show 4 events listed:\n%s", out)
	}
	mdf := filepath.Join("..", "..", "testdata", "third_party", "lhcb", "MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf")
	out, err = run(t, "plugin", "diff", pass, pass, "--from", mdf, "--events", "10")
	if err != nil || !strings.Contains(out, "\n10 events of "+mdf+": 10 agreeing, 0 differing (0.00%)\n") || strings.Contains(out, "differing by") {
		t.Fatalf("plugin diff of a plugin with itself: %v\n%s", err, out)
	}
	if _, err := run(t, "plugin", "diff", pass, pass, "--param-a", "novalue"); exitCode(err) != exitConfig {
		t.Fatalf("--param-a without =: %v", err)
	}
}
