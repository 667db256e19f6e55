package inspect

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// jsonError is the "error" object of the JSON report: the error that
// stopped the reading and, for a decode error, where it happened.
type jsonError struct {
	Message string `json:"message"`
	Format  string `json:"format,omitempty"`
	Field   string `json:"field,omitempty"`
	Offset  *int64 `json:"offset,omitempty"` // byte offset in the file
	Kind    string `json:"kind,omitempty"`   // the sentinel: "truncated", "bad magic", ...
}

// WriteJSON writes the report of file as one indented JSON object: "file",
// the report's fields (see format.Report; those of an empty report when
// rep is nil), and, when err is not nil, "error" with its message and, for
// a *schemas.DecodeError, the format, field, byte offset and kind of
// error.
func WriteJSON(w io.Writer, file string, rep *format.Report, err error) error {
	if rep == nil {
		rep = &format.Report{}
	}
	head, merr := json.Marshal(struct {
		File string `json:"file"`
	}{file})
	if merr != nil {
		return merr
	}
	body, merr := json.Marshal(rep)
	if merr != nil {
		return merr
	}
	// Both are objects: join them into one, the file first.
	out := append(head[:len(head)-1:len(head)-1], ',')
	out = append(out, body[1:]...)
	if err != nil {
		je := jsonError{Message: err.Error()}
		var de *schemas.DecodeError
		if errors.As(err, &de) {
			je.Format, je.Field, je.Offset, je.Kind = de.Format, de.Field, &de.Offset, de.Err.Error()
		}
		eb, merr := json.Marshal(je)
		if merr != nil {
			return merr
		}
		out = append(append(append(out[:len(out)-1], `,"error":`...), eb...), '}')
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, werr := w.Write(buf.Bytes())
	return werr
}
