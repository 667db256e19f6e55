package farm

import (
	"encoding/json"
	"testing"
)

func TestIncarnationJSON(t *testing.T) {
	// A lease id above 2^53: a JSON number of it loses its low bits in
	// readers that keep numbers as doubles.
	const lease = 0x694d7a1b2c3d4e5f
	b, err := json.Marshal(struct {
		I Incarnation `json:"incarnation"`
	}{lease})
	if err != nil || string(b) != `{"incarnation":"694d7a1b2c3d4e5f"}` {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	for _, in := range []string{`"694d7a1b2c3d4e5f"`, "7587855204314074719"} {
		var i Incarnation
		if err := json.Unmarshal([]byte(in), &i); err != nil || i != lease {
			t.Fatalf("unmarshal %s: %x, %v", in, uint64(i), err)
		}
	}
	for _, bad := range []string{`"xyz"`, `-1`, `true`, `"1x"`} {
		var i Incarnation
		if err := json.Unmarshal([]byte(bad), &i); err == nil {
			t.Fatalf("unmarshal %s: no error (got %x)", bad, uint64(i))
		}
	}
}

// TestRangeJSON: ranges of ids read as the ledger writes its own
// (first, n), in /status's farm.missing and the etcd records.
func TestRangeJSON(t *testing.T) {
	b, err := json.Marshal([]Range{{First: 5, N: 2}})
	if err != nil || string(b) != `[{"first":5,"n":2}]` {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	var r []Range
	if err := json.Unmarshal([]byte(`[{"First":7,"N":3}]`), &r); err != nil || len(r) != 1 || r[0] != (Range{7, 3}) {
		t.Fatalf("records written before the tags: %+v, %v", r, err)
	}
}
