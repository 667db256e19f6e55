package conf

import (
	"fmt"

	"github.com/dustin/go-humanize"
	"gopkg.in/yaml.v3"
)

// ByteSize is a number of bytes. In YAML it is a plain integer or a string
// with a unit, decimal ("500MB", "2 GB") or binary ("256MiB", "1GiB"), as
// parsed by go-humanize.
type ByteSize uint64

// UnmarshalYAML accepts an integer or a human-readable size.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	// A *yaml.TypeError (not a plain error) lets the decoder carry on and
	// report every other mistake in the file too.
	v, err := humanize.ParseBytes(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf(
			"line %d: cannot unmarshal `%s` into a byte size such as 268435456, \"256MiB\" or \"2GB\"", n.Line, n.Value)}}
	}
	*b = ByteSize(v)
	return nil
}

// MarshalYAML writes binary units when exact ("256MiB"), else bytes.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// String is the size in the largest binary unit that divides it exactly.
func (b ByteSize) String() string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, u := uint64(b), 0
	for v != 0 && v%1024 == 0 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d", v)
	}
	return fmt.Sprintf("%d%s", v, units[u])
}
