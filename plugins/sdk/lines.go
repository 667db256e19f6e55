package sdk

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-daq/sluice/schemas"
)

// Lines are a plugin's trigger line names in bit order: line i is bit i
// of schemas.Verdict.Lines. Give them as Description.Lines and accept
// events by name:
//
//	var lines = sdk.Lines{"big", "scifi_busy"}
//	...
//	out[i] = lines.Accept("big", "scifi_busy")
type Lines []string

// Accept is an accepted event on which the named lines fired (sdk.Accept
// of their bits). A name that is not one of ls fires no line and is said
// in the verdict's reason text ("unknown line \"bgi\""), kept with the
// event and shown by `sluice plugin check`, so that a misspelt name does
// not pass unseen.
func (ls Lines) Accept(names ...string) schemas.Verdict {
	bits, unknown := ls.Mask(names...)
	v := Accept(bits)
	if len(unknown) > 0 {
		q := make([]string, len(unknown))
		for i, n := range unknown {
			q[i] = fmt.Sprintf("%q", n)
		}
		v.Reason.Text = "unknown line " + strings.Join(q, ", ") + " (lines: " + strings.Join(ls, ", ") + ")"
	}
	return v
}

// Mask is the bitmask of the named lines (for Accept), and the names that
// are not lines.
func (ls Lines) Mask(names ...string) (bits uint64, unknown []string) {
	for _, n := range names {
		if i := slices.Index(ls, n); i >= 0 && i < schemas.MaxLines {
			bits |= 1 << i
		} else {
			unknown = append(unknown, n)
		}
	}
	return bits, unknown
}
