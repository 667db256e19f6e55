package cms

import "github.com/sluice-daq/sluice/schemas"

// WalkFEDs walks a block of concatenated FED fragments (the data of an FRD
// event) backwards from its end, as cmssw's FedRawDataInputSource and
// DAQSource do: read the trailer word, take Evt_lgth·8 bytes back to the
// header, read its Source_id, and repeat from there. fn receives each FED
// with its byte offset in data, last fragment first, and stops the walk by
// returning false. CRCs are not verified (see FED.CRCValid). Errors:
// *schemas.DecodeError wrapping ErrBadHeader (data not a whole number of
// 64-bit words), ErrTruncated (a lone word before the first fragment),
// ErrBadMagic (EOE_1 or BOE_1 marker) or ErrSizeOverflow (an Evt_lgth below
// 2 words or reaching before the start of data), at the offending word.
func WalkFEDs(data []byte, fn func(off int, f FED) bool) error {
	if len(data)%FEDWordSize != 0 {
		return schemas.Errorf(fedFormat, "fed data", 0, schemas.ErrBadHeader, "%d bytes is not a whole number of 64-bit words", len(data))
	}
	// Invariant: data[:end] holds the fragments not visited yet, and end is
	// a multiple of 8.
	for end := len(data); end > 0; {
		if end < FEDMinSize {
			return schemas.Errorf(fedFormat, "fed data", 0, schemas.ErrTruncated, "%d bytes left before the first fragment, need at least %d", end, FEDMinSize)
		}
		tOff := end - FEDWordSize
		if m := data[tOff+7] >> 4; m != FEDTrailerMarker {
			return schemas.Errorf(fedFormat, "trailer.EOE_1", int64(tOff+7), schemas.ErrBadMagic, "want 0x%x in bits 63:60, have 0x%x", FEDTrailerMarker, m)
		}
		n := trailerWords(data[tOff:]) * FEDWordSize
		if n < FEDMinSize || n > uint64(end) {
			return schemas.Errorf(fedFormat, "trailer.Evt_lgth", int64(tOff+4), schemas.ErrSizeOverflow, "Evt_lgth %d bytes, %d bytes available before the trailer's end", n, end)
		}
		start := end - int(n)
		f, err := decodeFED(data[start:end:end], start)
		if err != nil {
			return err
		}
		if !fn(start, f) {
			return nil
		}
		end = start
	}
	return nil
}
