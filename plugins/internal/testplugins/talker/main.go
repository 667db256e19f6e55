// Command talker is a test plugin that accepts every event and, once
// serving, writes to standard output: through os.Stdout (which go-plugin
// then redirects into its stdio stream) and straight to file descriptor 1
// (as C code would), a line on each Configure and Decide, one line of
// 100 KiB on the first Decide, and a line to os.Stderr.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

type talker struct {
	fd1     *os.File
	batches int
}

func (*talker) Describe() sdk.Description {
	return sdk.Description{Name: "talker", Version: "test", Lines: []string{"all"}}
}

func (t *talker) Configure(params map[string]string) error {
	fmt.Println("talker: configured")
	return sdk.CheckParams(params)
}

func (t *talker) Decide(_ *schemas.EventBatch, out []schemas.Verdict) error {
	t.batches++
	fmt.Printf("talker: batch %d of %d events\n", t.batches, len(out))
	fmt.Fprintf(t.fd1, "talker: raw batch %d\n", t.batches)
	fmt.Fprintf(os.Stderr, "talker: stderr batch %d\n", t.batches)
	if t.batches == 1 {
		fmt.Println("talker: long " + strings.Repeat("0123456789", 10<<10))
	}
	for i := range out {
		out[i] = sdk.Accept(1)
	}
	return nil
}

func main() {
	// The process's own descriptor 1: go-plugin replaces the os.Stdout
	// variable, not the descriptor.
	sdk.Serve(&talker{fd1: os.NewFile(1, "fd1")})
}
