package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node/internal/memtransport"
	"github.com/sluice-daq/sluice/node/transport"
)

// A transport is a package and one registration line: this is the line for
// the test transport mem://.
func init() { transport.Register(memtransport.Transport) }

// The configuration knows a transport from its registration alone: its
// scheme, its keys (decoded into its own settings, checked by its Check,
// unknown ones refused with the keys it takes) and whether an embedded
// emulator may feed it.
func TestConfigOfANewTransport(t *testing.T) {
	c, err := Parse([]byte(`
inputs:
  - uri: mem://a
    queue: 8
    emulator: {events: 10}
sources: [{name: a, sources: "1"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Inputs[0].Options.(*memtransport.Options); o.Queue != 8 {
		t.Fatalf("queue %d, want 8", o.Queue)
	}
	if _, ok := c.Inputs[0].Emulator.Sender.(*memtransport.SenderOptions); !ok {
		t.Fatalf("emulator sender settings %#v", c.Inputs[0].Emulator.Sender)
	}
	_, err = Parse([]byte(`
inputs:
  - uri: mem://b
    queue: 0
  - uri: mem://c
    qeue: 3
  - uri: mem://d
    emulator: {ring_size: 4MiB}
sources: [{name: a, sources: "1"}]
`))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 3 {
		t.Fatalf("want 3 problems, got %v", err)
	}
	for _, w := range []string{"inputs[0].queue: 0: want 1..65536 packets",
		`inputs[1].qeue (line 6): unknown key "qeue" (valid keys here: emulator, queue, uri)`,
		`inputs[2].emulator.ring_size (line 8): unknown key "ring_size"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in:\n%v", w, err)
		}
	}
}
