package format

import (
	"fmt"
	"slices"
	"strings"
)

// Registry is a list of formats in detection order. The zero value is
// empty and ready for Register; it is not safe to Register concurrently
// with other calls.
type Registry struct {
	formats []Format
}

// NewRegistry returns a registry of fs, in that order. It panics on a
// name registered twice (see Register): the list is written in code.
func NewRegistry(fs ...Format) *Registry {
	r := &Registry{}
	for _, f := range fs {
		if err := r.Register(f); err != nil {
			panic(err)
		}
	}
	return r
}

// Register adds f after the formats already registered: among formats
// matching equally surely, the one registered first wins detection.
// Errors: a format with f's Name, or an Exporter or Joiner with f's
// ExportName (in any case: Exporter looks names up so), is already
// registered.
func (r *Registry) Register(f Format) error {
	e, exports := ExportOf(f)
	for _, g := range r.formats {
		if g.Name() == f.Name() {
			return fmt.Errorf("format: %q registered twice", f.Name())
		}
		if ge, ok := ExportOf(g); exports && ok && strings.EqualFold(ge.ExportName(), e.ExportName()) {
			return fmt.Errorf("format: export name %q of %q is %q's already", e.ExportName(), f.Name(), g.Name())
		}
	}
	r.formats = append(r.formats, f)
	return nil
}

// All returns the registered formats in detection order.
func (r *Registry) All() []Format { return slices.Clone(r.formats) }

// Detect returns the format of the stream whose first bytes are head (see
// Format.Detect): the first registered format matching Certain, else the
// first matching Plausible, else nil.
func (r *Registry) Detect(head []byte) Format {
	var plausible Format
	for _, f := range r.formats {
		switch f.Detect(head) {
		case Certain:
			return f
		case Plausible:
			if plausible == nil {
				plausible = f
			}
		}
	}
	return plausible
}

// Refusal returns, for a stream of no detected format, the first
// Refuser's refusal of head (wrapped with the format's name), or nil.
func (r *Registry) Refusal(head []byte) error {
	for _, f := range r.formats {
		if rf, ok := f.(Refuser); ok {
			if err := rf.Refusal(head); err != nil {
				return fmt.Errorf("looks like %s, but: %w", f.Name(), err)
			}
		}
	}
	return nil
}

// Lookup returns the format named name (its Name), or nil.
func (r *Registry) Lookup(name string) Format {
	for _, f := range r.formats {
		if f.Name() == name {
			return f
		}
	}
	return nil
}

// Exporters returns how built events are written in each format that
// writes them (see ExportOf), in registration order.
func (r *Registry) Exporters() []Exporter {
	var out []Exporter
	for _, f := range r.formats {
		if e, ok := ExportOf(f); ok {
			out = append(out, e)
		}
	}
	return out
}

// Exporter returns the exporter whose ExportName is name (case-insensitive
// ASCII), or nil.
func (r *Registry) Exporter(name string) Exporter {
	for _, e := range r.Exporters() {
		if strings.EqualFold(e.ExportName(), name) {
			return e
		}
	}
	return nil
}

// Signs lists what detection looks for, in registration order, for an
// error that says what was expected: "a, b or c".
func (r *Registry) Signs() string {
	signs := make([]string, len(r.formats))
	for i, f := range r.formats {
		signs[i] = f.Sign()
	}
	if len(signs) < 2 {
		return strings.Join(signs, "")
	}
	return strings.Join(signs[:len(signs)-1], ", ") + " or " + signs[len(signs)-1]
}
