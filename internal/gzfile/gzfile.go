// Package gzfile reads a whole file that may be gzipped: sample data is
// often kept compressed (the CMS FEROL captures are), and the readers of
// whole files (the readout emulator, `sluice plugin check --from`) take
// either.
package gzfile

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
)

// ReadFile returns the bytes of the file at path, decompressed when it
// starts with the gzip magic (RFC 1952: 0x1f 0x8b). Errors: os.ReadFile's,
// and a gzip stream that does not decompress (naming path).
func ReadFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer zr.Close()
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("%s: gzip: %w", path, err)
	}
	return out, nil
}
