// Package synth defines the detector-like payloads the readout emulator
// (`sluice readout`) puts in fragments, so that example triggers have real
// quantities to cut on: calorimeter towers with transverse energies, muon
// candidates with transverse momenta, tracker hits. Content is a pure
// function of (seed, event id, source), so runs are reproducible and a
// trigger's decisions can be checked.
//
// # Payload layout (version 1), little-endian
//
//	| off | size | field    | meaning                                             |
//	|-----|------|----------|-----------------------------------------------------|
//	|   0 |    1 | kind     | Kind: 1 ECAL, 2 HCAL, 3 muon, 4 tracker             |
//	|   1 |    1 | version  | 1                                                   |
//	|   2 |    2 | count    | records that carry data (the rest is zero padding)  |
//	|   4 |    4 | source   | source id that produced the payload                 |
//	|   8 | 8·k | records  | k = (size-8)/8 slots of 8 bytes, count of them used |
//
// Records by kind (8 bytes each):
//
//	ECAL/HCAL tower:  u16 tower id, u16 flags (0), u32 transverse energy ET in MeV
//	muon candidate:   u32 transverse momentum pT in MeV, i8 charge (±1), u8 station mask, u16 0
//	tracker hit:      u32 channel, u16 ADC counts, u16 0
//
// Bytes after the last whole slot are zero.
package synth

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/sluice-daq/sluice/schemas"
)

// Kind of detector content in a payload.
type Kind uint8

const (
	KindECAL    Kind = 1
	KindHCAL    Kind = 2
	KindMuon    Kind = 3
	KindTracker Kind = 4
)

// Layout constants.
const (
	Version    = 1
	HeaderSize = 8
	RecordSize = 8
)

// KindOf maps a sub-detector (source group) name to its payload kind:
// "ecal", "hcal", "muon"; anything else is tracker-like.
func KindOf(group string) Kind {
	switch group {
	case "ecal":
		return KindECAL
	case "hcal":
		return KindHCAL
	case "muon":
		return KindMuon
	}
	return KindTracker
}

func (k Kind) String() string {
	switch k {
	case KindECAL:
		return "ecal"
	case KindHCAL:
		return "hcal"
	case KindMuon:
		return "muon"
	case KindTracker:
		return "tracker"
	}
	return "unknown"
}

// Physics of the generator. Noise towers and candidates follow exponential
// spectra; a small fraction of fragments carries one hard object, which is
// what the example level-0 trigger selects.
const (
	ecalNoiseMeanMeV = 120
	hcalNoiseMeanMeV = 180
	muonMeanPtMeV    = 450
	hardFraction     = 0.02 // per fragment: one tower of 2-8 GeV
)

// Append appends a payload of exactly size bytes (size >= HeaderSize; a
// smaller size is raised to HeaderSize) for the given kind, event and source.
func Append(dst []byte, kind Kind, seed, eventID uint64, source uint32, size int) []byte {
	if size < HeaderSize {
		size = HeaderSize
	}
	start := len(dst)
	dst = append(dst, make([]byte, size)...)
	p := dst[start:]
	slots := (size - HeaderSize) / RecordSize
	// One PCG stream per (seed, event, source): deterministic, no allocation.
	var r rand.PCG
	r.Seed(seed^eventID*0x9E3779B97F4A7C15, uint64(source)*0xBF58476D1CE4E5B9+uint64(kind))
	u := func() float64 { return (float64(r.Uint64()>>11) + 0.5) / (1 << 53) }
	count := slots
	if kind == KindMuon {
		// Most muon stations see no candidate; a few see one to three.
		count = min(slots, int(-math.Log(u())*0.4))
	}
	le := binary.LittleEndian
	for i := 0; i < count; i++ {
		rec := p[HeaderSize+RecordSize*i:]
		switch kind {
		case KindECAL, KindHCAL:
			mean := float64(ecalNoiseMeanMeV)
			if kind == KindHCAL {
				mean = hcalNoiseMeanMeV
			}
			et := -math.Log(u()) * mean
			le.PutUint16(rec[0:], uint16(uint32(i)+source*uint32(slots)))
			le.PutUint32(rec[4:], uint32(et))
		case KindMuon:
			pt := -math.Log(u()) * muonMeanPtMeV
			le.PutUint32(rec[0:], uint32(pt))
			rec[4] = 1
			if r.Uint64()&1 == 1 {
				rec[4] = 0xFF // -1
			}
			rec[5] = byte(r.Uint64() & 0x1F)
		default:
			le.PutUint32(rec[0:], source<<16|uint32(i))
			le.PutUint16(rec[4:], uint16(r.Uint64()%1024))
		}
	}
	if (kind == KindECAL || kind == KindHCAL) && count > 0 && u() < hardFraction {
		// One hard tower, as from an electron, photon or hadron shower.
		i := int(r.Uint64() % uint64(count))
		le.PutUint32(p[HeaderSize+RecordSize*i+4:], uint32(2000+u()*6000))
	}
	p[0] = byte(kind)
	p[1] = Version
	le.PutUint16(p[2:], uint16(min(count, math.MaxUint16)))
	le.PutUint32(p[4:], source)
	return dst
}

// Payload is a decoded synthetic payload: a view, nothing copied.
type Payload struct {
	Kind   Kind
	Source uint32
	Count  int
	recs   []byte
}

// Decode checks a synthetic payload's header and that its count fits the
// bytes. Errors: *schemas.DecodeError wrapping ErrTruncated, ErrBadVersion,
// ErrBadHeader (unknown kind) or ErrSizeOverflow (count past the end).
func Decode(p []byte) (Payload, error) {
	const format = "synth"
	if len(p) < HeaderSize {
		return Payload{}, schemas.Errorf(format, "header", 0, schemas.ErrTruncated, "need %d bytes, have %d", HeaderSize, len(p))
	}
	if p[1] != Version {
		return Payload{}, schemas.Errorf(format, "version", 1, schemas.ErrBadVersion, "want %d, have %d", Version, p[1])
	}
	k := Kind(p[0])
	if k < KindECAL || k > KindTracker {
		return Payload{}, schemas.Errorf(format, "kind", 0, schemas.ErrBadHeader, "unknown kind %d", p[0])
	}
	n := int(binary.LittleEndian.Uint16(p[2:]))
	if HeaderSize+n*RecordSize > len(p) {
		return Payload{}, schemas.Errorf(format, "count", 2, schemas.ErrSizeOverflow, "%d records need %d bytes, have %d", n, HeaderSize+n*RecordSize, len(p))
	}
	return Payload{Kind: k, Source: binary.LittleEndian.Uint32(p[4:]), Count: n, recs: p[HeaderSize : HeaderSize+n*RecordSize]}, nil
}

// Tower returns calorimeter record i (0 <= i < Count): tower id and ET in MeV.
func (p Payload) Tower(i int) (id uint16, etMeV uint32) {
	r := p.recs[i*RecordSize:]
	return binary.LittleEndian.Uint16(r), binary.LittleEndian.Uint32(r[4:])
}

// Muon returns muon record i: pT in MeV and charge (+1 or -1).
func (p Payload) Muon(i int) (ptMeV uint32, charge int8) {
	r := p.recs[i*RecordSize:]
	return binary.LittleEndian.Uint32(r), int8(r[4])
}

// Hit returns tracker record i: channel and ADC counts.
func (p Payload) Hit(i int) (channel uint32, adc uint16) {
	r := p.recs[i*RecordSize:]
	return binary.LittleEndian.Uint32(r), binary.LittleEndian.Uint16(r[4:])
}
