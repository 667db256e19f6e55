package emulator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
)

// Config configures Run (`sluice readout`). Zero values take the defaults
// noted.
type Config struct {
	To   string // the URI to send to, of any registered transport: shm://NAME, tcp://HOST:PORT, udp://HOST:PORT[?format=vtp], file://PATH
	From string // file mode: native MFP stream, MDF/MEP (LHCb) or VDIF file; "" = synthetic

	Events   uint64        // events to generate (synthetic; default 1000 unless Duration is set)
	Duration time.Duration // stop generating after this long (0: no limit)
	Rate     float64       // events per second; 0 = as fast as the output takes them
	Loop     int           // file mode: replay the file this many times (default 1), event ids (and LHCb ODIN event numbers) shifted

	Groups     []schemas.SourceGroup // synthetic sources by sub-detector (payload kind from the name)
	Sources    int                   // synthetic sources 0..Sources-1 when Groups is empty (default 4)
	Packing    int                   // fragments per packet (default 1)
	Size       SizeDist              // payload sizes (default fixed:128)
	Seed       uint64                // payload content and fault draws
	FirstEvent uint64                // event id of the first event

	Faults Faults

	// Sender are the settings of To's sender, made by its transport's
	// NewSenderOptions (nil: its defaults): e.g. the ring size of shm://,
	// the connections of tcp://.
	Sender transport.SenderOptions `json:"-"`
}

// Faults are fault-injection probabilities per packet. Drop, Truncate,
// Corrupt and Duplicate exclude each other (their sum must be <= 1);
// Reorder and Stall apply independently.
type Faults struct {
	Drop      float64 // the packet is not sent (UDP: its sequence number is skipped)
	Duplicate float64 // the packet is sent twice
	Corrupt   float64 // one payload byte of one fragment is flipped after its CRC was computed
	Truncate  float64 // the packet is cut short (TCP: mid-packet disconnect and reconnect)
	Reorder   float64 // the packet is held back behind 1..ReorderWindow later packets
	Stall     float64 // the packet's source stalls: it and the source's next packets wait StallDuration

	ReorderWindow int           // default 8
	StallDuration time.Duration // default 10 ms
}

func (f Faults) validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"drop", f.Drop}, {"duplicate", f.Duplicate}, {"corrupt", f.Corrupt}, {"truncate", f.Truncate}, {"reorder", f.Reorder}, {"stall", f.Stall}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("fault --%s: probability %v is not in [0, 1]", p.name, p.v)
		}
	}
	if s := f.Drop + f.Duplicate + f.Corrupt + f.Truncate; s > 1 {
		return fmt.Errorf("faults --drop + --duplicate + --corrupt + --truncate = %v, must be <= 1 (they exclude each other)", s)
	}
	if f.ReorderWindow < 0 || f.StallDuration < 0 {
		return fmt.Errorf("faults: negative reorder window or stall duration")
	}
	return nil
}

// SizeDist is a payload size distribution in bytes.
type SizeDist struct {
	Kind string  // "fixed", "uniform" or "lognormal"
	A, B float64 // fixed: A; uniform: [A, B]; lognormal: mean A bytes, sigma B of the log
}

// ParseSizeDist parses fixed:N, uniform:MIN,MAX or lognormal:MEAN,SIGMA
// (sizes in bytes, MEAN the distribution's mean, SIGMA that of log(size)).
func ParseSizeDist(s string) (SizeDist, error) {
	kind, args, _ := strings.Cut(s, ":")
	var v []float64
	for _, a := range strings.Split(args, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(a), 64)
		if err != nil || x < 0 || math.IsInf(x, 0) {
			return SizeDist{}, fmt.Errorf("size distribution %q: %q is not a non-negative number", s, a)
		}
		v = append(v, x)
	}
	d := SizeDist{Kind: kind}
	switch {
	case kind == "fixed" && len(v) == 1:
		d.A = v[0]
	case kind == "uniform" && len(v) == 2 && v[0] <= v[1]:
		d.A, d.B = v[0], v[1]
	case kind == "lognormal" && len(v) == 2 && v[0] > 0:
		d.A, d.B = v[0], v[1]
	default:
		return SizeDist{}, fmt.Errorf("size distribution %q: want fixed:N, uniform:MIN,MAX (MIN <= MAX) or lognormal:MEAN,SIGMA (MEAN > 0)", s)
	}
	return d, nil
}

func (d SizeDist) String() string {
	if d.Kind == "fixed" {
		return fmt.Sprintf("fixed:%g", d.A)
	}
	return fmt.Sprintf("%s:%g,%g", d.Kind, d.A, d.B)
}

// maxPayload caps drawn sizes so that a long log-normal tail cannot ask for
// more than a UDP datagram or a ring record holds.
const maxPayload = 1 << 20

// draw returns one size.
func (d SizeDist) draw(r *rand.Rand) int {
	var x float64
	switch d.Kind {
	case "uniform":
		x = d.A + r.Float64()*(d.B-d.A+1)
	case "lognormal":
		// mean = exp(mu + sigma^2/2)
		mu := math.Log(d.A) - d.B*d.B/2
		x = math.Exp(mu + d.B*r.NormFloat64())
	default:
		x = d.A
	}
	return min(int(x), maxPayload)
}

// ParseGroups parses sub-detector groups "ecal:0-31,hcal:32-47,muon:48-63":
// comma-separated items, where NAME:IDS starts a group and a bare IDS item
// continues the previous one ("ecal:0-31,40,hcal:32-39"). IDS is a source
// id or an inclusive range. Sources must be unique across groups.
func ParseGroups(s string) ([]schemas.SourceGroup, error) {
	var groups []schemas.SourceGroup
	lists := map[string][]string{}
	var order []string
	cur := ""
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if name, ids, ok := strings.Cut(item, ":"); ok {
			if name == "" {
				return nil, fmt.Errorf("groups %q: item %q has an empty group name", s, item)
			}
			if _, seen := lists[name]; !seen {
				order = append(order, name)
			}
			cur, item = name, ids
		}
		if cur == "" {
			return nil, fmt.Errorf("groups %q: %q comes before any \"NAME:\" item", s, item)
		}
		lists[cur] = append(lists[cur], item)
	}
	seen := map[uint32]string{}
	for _, name := range order {
		ids, err := schemas.ParseSourceList(strings.Join(lists[name], ","))
		if err != nil {
			return nil, fmt.Errorf("groups: %s: %w", name, err)
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("groups: %s has no sources", name)
		}
		for _, id := range ids {
			if g, dup := seen[id]; dup {
				return nil, fmt.Errorf("groups: source %d is in both %s and %s", id, g, name)
			}
			seen[id] = name
		}
		groups = append(groups, schemas.SourceGroup{Name: name, Sources: ids})
	}
	return groups, nil
}
