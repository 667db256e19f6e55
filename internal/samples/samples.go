// Package samples gives tests of any package the repository's sample data
// (testdata/third_party/...): one place that finds the directory from the
// test's working directory and decompresses the gzipped samples (the CMS
// FEROL captures are kept gzipped).
package samples

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-daq/sluice/internal/gzfile"
)

// Path is the absolute path of testdata/third_party/rel (e.g.
// "cms/mol_run55.dat.gz"): the module root is the first directory up from
// the working directory (a test's is its package's) with a go.mod.
func Path(t testing.TB, rel string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "third_party", filepath.FromSlash(rel))
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatalf("samples: no go.mod above the working directory, so no testdata/third_party/%s", rel)
		}
		dir = up
	}
}

// Read returns the bytes of testdata/third_party/rel, decompressed when
// the file is gzipped; a file that is missing or does not decompress fails
// t.
func Read(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := gzfile.ReadFile(Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
