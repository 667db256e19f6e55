package lhcb

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"

	"github.com/sluice-daq/sluice/schemas"
)

// A compressed MDF body is a sequence of ROOT-style blocks (ROOT's R__zip
// framing, as LHCb writes them): a 9-byte block header, then the compressed
// bytes.
//
//	| off | size | field                                                  |
//	|-----|------|--------------------------------------------------------|
//	|   0 |    2 | algorithm tag: "ZL" zlib, "XZ" lzma, "L4" lz4, "ZS"    |
//	|     |      | zstd, "CS" old ROOT deflate                            |
//	|   2 |    1 | method (8 = deflate for "ZL")                          |
//	|   3 |    3 | compressed bytes following this header (LE)            |
//	|   6 |    3 | uncompressed bytes of this block (LE)                  |
//
// Only "ZL" is decoded (it is what LHCb files use); the other known tags are
// reported as unsupported, never guessed at.
const (
	blockHeaderSize = 9
	maxBlockBytes   = 1<<24 - 1
	// writeChunk keeps a block's compressed size under 2^24 even when
	// deflate expands incompressible input (5 bytes per 16 KiB at worst).
	writeChunk = 0xFF0000
	zDeflated  = 8
)

// unsupportedTags are the algorithm tags of real ROOT block framing that
// this reader does not decode.
var unsupportedTags = map[string]string{"XZ": "lzma", "L4": "lz4", "ZS": "zstd", "CS": "old ROOT deflate"}

// inflater decodes compressed MDF bodies, reusing its zlib state between
// records.
type inflater struct {
	src bytes.Reader
	zr  io.ReadCloser
}

// inflate appends the uncompressed body of the ROOT blocks in src to dst.
// base is the offset of src in the caller's stream, for errors.
func (f *inflater) inflate(dst, src []byte, base int64) ([]byte, error) {
	off := 0
	for off < len(src) {
		at := base + int64(off)
		if len(src)-off < blockHeaderSize {
			return dst, schemas.Errorf(formatMDF, "compressed block", at, schemas.ErrTruncated, "need a %d-byte block header, have %d bytes", blockHeaderSize, len(src)-off)
		}
		h := src[off : off+blockHeaderSize]
		tag := string(h[:2])
		if name, ok := unsupportedTags[tag]; ok {
			return dst, schemas.Errorf(formatMDF, "compressed block", at, schemas.ErrUnsupported, "compression algorithm %q (%s) is not supported; only \"ZL\" (zlib)", tag, name)
		}
		if tag != "ZL" {
			return dst, schemas.Errorf(formatMDF, "compressed block", at, schemas.ErrBadMagic, "algorithm tag %q (bytes %#x) is not a ROOT compression tag", tag, h[:2])
		}
		if h[2] != zDeflated {
			return dst, schemas.Errorf(formatMDF, "compressed block", at+2, schemas.ErrUnsupported, "zlib method %d, know %d (deflate)", h[2], zDeflated)
		}
		csize := int(h[3]) | int(h[4])<<8 | int(h[5])<<16
		usize := int(h[6]) | int(h[7])<<8 | int(h[8])<<16
		end := off + blockHeaderSize + csize
		if end > len(src) {
			return dst, schemas.Errorf(formatMDF, "compressed block", at+3, schemas.ErrTruncated, "block of %d compressed bytes, %d left in the body", csize, len(src)-off-blockHeaderSize)
		}
		if len(dst)+usize > MaxRecordSize {
			return dst, schemas.Errorf(formatMDF, "compressed block", at+6, schemas.ErrSizeOverflow, "uncompressed body would exceed %d bytes", MaxRecordSize)
		}
		var err error
		if dst, err = f.block(dst, src[off+blockHeaderSize:end], usize); err != nil {
			return dst, schemas.Errorf(formatMDF, "compressed block", at, errSentinel(err), "zlib: %v", err)
		}
		off = end
	}
	return dst, nil
}

// block inflates one zlib stream that must yield exactly usize bytes.
func (f *inflater) block(dst, data []byte, usize int) ([]byte, error) {
	f.src.Reset(data)
	var err error
	if f.zr == nil {
		f.zr, err = zlib.NewReader(&f.src)
	} else {
		err = f.zr.(zlib.Resetter).Reset(&f.src, nil)
	}
	if err != nil {
		return dst, err
	}
	start := len(dst)
	// Read at most usize+1 bytes: one more than announced is an error, and
	// the announced size is not trusted for a preallocation.
	dst, err = appendRead(dst, io.LimitReader(f.zr, int64(usize)+1))
	if err != nil {
		return dst, err
	}
	if n := len(dst) - start; n != usize {
		return dst, fmt.Errorf("%w: block inflates to %d bytes, header says %d", errSizeMismatch, n, usize)
	}
	return dst, nil
}

var errSizeMismatch = errors.New("size mismatch")

// errSentinel classifies a zlib failure: a bad Adler-32 is a checksum
// mismatch, a bad stream header a bad header, anything else (corrupt
// deflate data, wrong size) an inconsistency.
func errSentinel(err error) error {
	switch {
	case errors.Is(err, zlib.ErrChecksum):
		return schemas.ErrCRCMismatch
	case errors.Is(err, zlib.ErrHeader), errors.Is(err, zlib.ErrDictionary):
		return schemas.ErrBadHeader
	}
	return schemas.ErrInconsistent
}

// appendRead appends everything r yields to dst, growing dst as data
// arrives (never by an announced size).
func appendRead(dst []byte, r io.Reader) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// deflate appends body compressed as "ZL" ROOT blocks at zlib level to dst.
func deflate(dst, body []byte, level int) ([]byte, error) {
	var zbuf bytes.Buffer
	zw, err := zlib.NewWriterLevel(&zbuf, level)
	if err != nil {
		return dst, err
	}
	for off := 0; off < len(body); {
		end := min(off+writeChunk, len(body))
		zbuf.Reset()
		zw.Reset(&zbuf)
		if _, err := zw.Write(body[off:end]); err != nil {
			return dst, err
		}
		if err := zw.Close(); err != nil {
			return dst, err
		}
		c, u := zbuf.Len(), end-off
		if c > maxBlockBytes {
			return dst, fmt.Errorf("mdf: compressed block of %d bytes exceeds the 24-bit size field", c)
		}
		dst = append(dst, 'Z', 'L', zDeflated, byte(c), byte(c>>8), byte(c>>16), byte(u), byte(u>>8), byte(u>>16))
		dst = append(dst, zbuf.Bytes()...)
		off = end
	}
	return dst, nil
}
