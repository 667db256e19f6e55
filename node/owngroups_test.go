package node

import (
	"reflect"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// TestOwnGroups: a farm node's emulator file owes it its own sources only
// (a trial saw every farm node warn that the other RUs' sources were not
// in its file).
func TestOwnGroups(t *testing.T) {
	groups := []schemas.SourceGroup{{Name: "rich", Sources: []uint32{1, 2, 3}}, {Name: "odin", Sources: []uint32{10}}, {Name: "velo", Sources: []uint32{20, 21}}}
	got := ownGroups(groups, "2-3,20")
	want := []schemas.SourceGroup{{Name: "rich", Sources: []uint32{2, 3}}, {Name: "velo", Sources: []uint32{20}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("own groups %+v, want %+v", got, want)
	}
}
