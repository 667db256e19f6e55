package lhcb

import (
	"os"
	"path/filepath"
	"testing"
)

// The real samples (see testdata/third_party/lhcb/README.md).
var (
	mdfSample = filepath.Join("..", "..", "testdata", "third_party", "lhcb", "MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf")
	mepSample = filepath.Join("..", "..", "testdata", "third_party", "lhcb", "upgrade_mc_minbias_scifi_v5_pf10_retinacluster.mep")
)

// Facts of the MDF sample, checked independently of this package (Python
// struct parsing while writing it, and the provenance table in
// testdata/third_party/lhcb/README.md).
const (
	sampleRecords = 10
	sampleBanks   = 12364
	sampleRun     = 6718861
	sampleSources = 1238 // distinct (type, source id)
)

// sampleRecordOffsets are the stream offsets of the MDF sample's records.
var sampleRecordOffsets = []int64{0, 349460, 467556, 612352, 762360, 954728, 1051020, 1240368, 1452492, 1709708}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
