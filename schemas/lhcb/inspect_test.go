package lhcb

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

func TestDetect(t *testing.T) {
	mdf := readFile(t, mdfSample)
	mep := readFile(t, mepSample)
	if !DetectMDF(mdf[:64]) || DetectMEP(mdf[:64]) {
		t.Fatal("MDF sample not detected as MDF only")
	}
	if !DetectMEP(mep[:64]) || DetectMDF(mep[:64]) {
		t.Fatal("MEP sample not detected as MEP only")
	}
	for _, head := range [][]byte{nil, mdf[:10], []byte("SLFG\x01 0000000000000000000000000000000000000000000000"), bytes.Repeat([]byte{0}, 64)} {
		if DetectMDF(head) || DetectMEP(head) {
			t.Fatalf("detected % x", head)
		}
	}
	// A valid header followed by something that is not a raw bank.
	bad := bytes.Clone(mdf[:64])
	bad[48] = 0
	if DetectMDF(bad) {
		t.Fatal("detected an MDF header without a bank")
	}
}

func TestInspectMDF(t *testing.T) {
	data := readFile(t, mdfSample)
	rep, err := Inspect(bytes.NewReader(data), 3)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Format != FormatMDF || rep.Records != 10 || rep.Events != 10 || rep.Bytes != int64(len(data)) || rep.Banks != sampleBanks {
		t.Fatalf("report %+v", rep)
	}
	if rep.Sources != sampleSources || rep.SourceIDs != 590 || len(rep.BanksByType) != 11 || rep.BanksByType[16] != 10 {
		t.Fatalf("sources %d, source ids %d, types %v", rep.Sources, rep.SourceIDs, rep.BanksByType)
	}
	if rep.Checksums != (ChecksumCounts{Valid: 10}) || len(rep.Runs) != 1 || rep.Runs[0] != sampleRun || rep.EventNumbers != [2]uint64{6001, 6010} {
		t.Fatalf("checksums %+v runs %v events %v", rep.Checksums, rep.Runs, rep.EventNumbers)
	}
	// Record sizes from the record offsets: min 96292, max 349460.
	if rep.RecordBytes.Min != 96292 || rep.RecordBytes.Max != 349460 || rep.RecordBytes.Median != 192368 {
		t.Fatalf("record sizes %+v", rep.RecordBytes)
	}
	if len(rep.Detail) != 3 || rep.Detail[1].EventNumber != 6002 || rep.Detail[1].Offset != sampleRecordOffsets[1] || rep.Detail[1].Banks != 1236 || !rep.Detail[1].HasODIN {
		t.Fatalf("detail %+v", rep.Detail)
	}
	// The record holds a 48-byte MDF header (version 3) and the banks.
	for i, d := range rep.Detail {
		if want := int(sampleRecordOffsets[i+1] - sampleRecordOffsets[i]); d.RecordBytes != want || d.BankBytes != want-48 || d.InRecord != 0 {
			t.Fatalf("event %d: record bytes %d, bank bytes %d, index in record %d; want %d, %d, 0", i, d.RecordBytes, d.BankBytes, d.InRecord, want, want-48)
		}
	}
	js, err := json.Marshal(rep)
	if err != nil || !bytes.Contains(js, []byte(`"format":"lhcb-mdf"`)) || !bytes.Contains(js, []byte(`"banks_by_type":{"13":100`)) ||
		!bytes.Contains(js, []byte(`"readout_sources":1238`)) || !bytes.Contains(js, []byte(`"record_bytes":349460,"odin":true`)) {
		t.Fatalf("json %s, %v", js, err)
	}
}

func TestInspectBadChecksumAndTruncation(t *testing.T) {
	data := bytes.Clone(readFile(t, mdfSample))
	// Record 2: one bit flipped in its first bank's payload; record 4: no checksum.
	data[sampleRecordOffsets[2]+48+10] ^= 1
	binary.LittleEndian.PutUint32(data[sampleRecordOffsets[4]+12:], 0)
	rep, err := Inspect(bytes.NewReader(data[:sampleRecordOffsets[9]+10]), 0)
	decodetest.Want(t, err, schemas.ErrTruncated, sampleRecordOffsets[9])
	if rep.Records != 9 || rep.Checksums != (ChecksumCounts{Valid: 7, Bad: 1, Absent: 1}) {
		t.Fatalf("partial report: %d records, checksums %+v", rep.Records, rep.Checksums)
	}
}

func TestInspectMEP(t *testing.T) {
	data := readFile(t, mepSample)
	rep, err := Inspect(bytes.NewReader(data), 10)
	if err != nil {
		t.Fatal(err)
	}
	// 1241 (type, source) pairs: the 1238 blocks plus three blocks whose
	// "no bank in this event" fragments are size 0 with type 0.
	if rep.Format != FormatMEP || rep.Records != 1 || rep.Events != 10 || rep.Banks != 10*1238 || rep.Sources != 1241 || rep.BanksByType[0] != 16 || len(rep.PackingFactors) != 1 || rep.PackingFactors[0] != 10 {
		t.Fatalf("report %+v", rep)
	}
	if rep.Checksums != (ChecksumCounts{Absent: 1}) || len(rep.Detail) != 10 {
		t.Fatalf("checksums %+v, %d details", rep.Checksums, len(rep.Detail))
	}
	// Every event sits in the one MEP record at offset 0, at its own
	// position in it.
	for i, d := range rep.Detail {
		if !d.HasODIN || d.Banks != 1238 || d.Offset != 0 || d.InRecord != i || d.RecordBytes != len(data) || d.BankBytes == 0 {
			t.Fatalf("detail %d: %+v", i, d)
		}
	}
	// The MEP sample holds the same simulated events as the MDF sample.
	if len(rep.Runs) != 1 || rep.Runs[0] != sampleRun || rep.EventNumbers != [2]uint64{6001, 6010} {
		t.Fatalf("runs %v, event numbers %v", rep.Runs, rep.EventNumbers)
	}
}
