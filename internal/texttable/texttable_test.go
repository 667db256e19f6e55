package texttable

import (
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	var tb Table
	tb.Row("events built", 18000)
	tb.Row("  accepted", 2356)
	tb.Row("    line µ", "7")
	tb.Row("balanced", "yes")
	var b strings.Builder
	if _, err := tb.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"events built  18000\n" +
		"  accepted     2356\n" +
		"    line µ        7\n" +
		"balanced        yes\n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}
