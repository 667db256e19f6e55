package farm

import (
	"fmt"
	"strconv"
)

// Incarnation is a member's incarnation: the id of the etcd lease its
// membership record lives under (a fenced or restarted node comes back
// as a new one). People and tools see it in hex, as etcdctl shows lease
// ids: logs, metrics labels, `sluice farm status`, and JSON, where it is
// a string ("694d7a1b2c3d4e5f"), since a 63-bit number in JSON loses its
// low bits in readers that keep numbers as doubles (jq, JavaScript).
// Decoding JSON also takes a number (records written before it was a
// string). Wire messages carry it as a u64.
type Incarnation uint64

// MarshalJSON writes the incarnation as a hex string.
func (i Incarnation) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, strconv.FormatUint(uint64(i), 16)), nil
}

// UnmarshalJSON reads a hex string or a (decimal) number.
func (i *Incarnation) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		s, err := strconv.Unquote(string(b))
		if err != nil {
			return fmt.Errorf("farm: incarnation %s: %w", b, err)
		}
		v, err := strconv.ParseUint(s, 16, 64)
		if err != nil {
			return fmt.Errorf("farm: incarnation %q: not a hex lease id", s)
		}
		*i = Incarnation(v)
		return nil
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("farm: incarnation %s: not a lease id", b)
	}
	*i = Incarnation(v)
	return nil
}
