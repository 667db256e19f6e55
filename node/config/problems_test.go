package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sluice-daq/sluice/node/transport"
)

// minimal is the smallest valid configuration: one input, one source group.
const minimal = `
inputs:
  - uri: tcp://127.0.0.1:7000
sources:
  - name: velo
    sources: "0-3"
`

// TestProblems runs the configuration rules written as data under
// testdata/problems: each case is a YAML file and the problems Parse
// reports for it, one per line in the order reported ("ok" for none).
//
//	parse [minimal]
//	<YAML; with minimal, the minimal configuration is appended after it>
//	----
//	<problems>
//
// `go test ./node/config -run TestProblems -rewrite` writes the outputs
// anew after a deliberate change of a message; review the diff.
func TestProblems(t *testing.T) {
	datadriven.Walk(t, "testdata/problems", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd != "parse" {
				td.Fatalf(t, "unknown command %q", td.Cmd)
			}
			in := td.Input + "\n"
			if td.HasArg("minimal") {
				in += minimal
			}
			_, err := Parse([]byte(in))
			if err == nil {
				return "ok\n"
			}
			var ce *Error
			if !errors.As(err, &ce) {
				td.Fatalf(t, "want *Error, got %v", err)
			}
			var b strings.Builder
			for _, p := range ce.Problems {
				b.WriteString(p.String())
				b.WriteByte('\n')
			}
			// The lists of registered transports are written as
			// placeholders: a transport registered in package all must
			// not need these files rewritten.
			return strings.NewReplacer(transport.Forms(), "<transports>", transport.EmbeddableForms(), "<embeddable transports>").Replace(b.String())
		})
	})
}
