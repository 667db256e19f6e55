package farm

import (
	"math"
	"reflect"
	"testing"
)

// UnitGaps: the ids of a unit's ranges not seen, at both ends of each
// range and between seen ids, up to the last id there is.
func TestUnitGaps(t *testing.T) {
	u := Unit{Kind: UnitEvents, Ranges: []Range{{First: 10, N: 5}, {First: 20, N: 3}, {First: math.MaxUint64 - 1, N: 2}}}
	for _, c := range []struct {
		ids  []uint64
		want []Range
	}{
		{[]uint64{10, 11, 12, 13, 14, 20, 21, 22, math.MaxUint64 - 1, math.MaxUint64}, nil},
		{[]uint64{12, 21, math.MaxUint64}, []Range{{First: 10, N: 2}, {First: 13, N: 2}, {First: 20, N: 1}, {First: 22, N: 1}, {First: math.MaxUint64 - 1, N: 1}}},
		{[]uint64{14}, []Range{{First: 10, N: 4}, {First: 20, N: 3}, {First: math.MaxUint64 - 1, N: 2}}},
		{nil, []Range{{First: 10, N: 5}, {First: 20, N: 3}, {First: math.MaxUint64 - 1, N: 2}}},
	} {
		if got := UnitGaps(u, c.ids); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ids %v: gaps %v, want %v", c.ids, got, c.want)
		}
	}
	// Gaps at both ends of each range, seen ids between them.
	v := Unit{Kind: UnitEvents, Ranges: []Range{{First: 0, N: 3}, {First: 5, N: 3}}}
	if got := UnitGaps(v, []uint64{1, 6}); !reflect.DeepEqual(got, []Range{{First: 0, N: 1}, {First: 2, N: 1}, {First: 5, N: 1}, {First: 7, N: 1}}) {
		t.Errorf("gaps %v", got)
	}
}
