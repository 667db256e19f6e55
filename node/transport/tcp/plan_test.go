package tcp

import (
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node/transport"
)

// TestStreamsPlanned: an input's memory is planned for the connections it
// takes at once — max_connections, else expect_streams, else
// DefaultStreams (it planned one stream and took any number) — and a
// max_connections below expect_streams, which could never end the input,
// is refused.
func TestStreamsPlanned(t *testing.T) {
	const window, chunk = 64 << 10, 8 << 10
	for _, c := range []struct {
		o    Options
		want int
		from string
	}{
		{Options{CreditWindow: window}, DefaultStreams, "default"},
		{Options{CreditWindow: window, ExpectStreams: 10}, 10, "expect_streams"},
		{Options{CreditWindow: window, ExpectStreams: 10, MaxConnections: 12}, 12, "max_connections"},
		{Options{CreditWindow: window, MaxConnections: 3}, 3, "max_connections"},
	} {
		n, from := c.o.streams()
		if n != c.want || from != c.from {
			t.Errorf("%+v: plans %d streams from %s, want %d from %s", c.o, n, from, c.want, c.from)
		}
		if got, want := c.o.MemoryBytes(), int64(c.want*(window+chunk)); got != want {
			t.Errorf("%+v: MemoryBytes %d, want %d", c.o, got, want)
		}
		if ps := c.o.Check(transport.URI{}); len(ps) != 0 {
			t.Errorf("%+v: %v", c.o, ps)
		}
	}
	o := Options{CreditWindow: window, ExpectStreams: 10, MaxConnections: 8}
	if ps := o.Check(transport.URI{}); len(ps) != 1 || !strings.Contains(ps.String(), "max_connections") || !strings.Contains(ps.String(), "expect_streams (10)") {
		t.Errorf("max_connections 8 with expect_streams 10: %v", ps)
	}
}
