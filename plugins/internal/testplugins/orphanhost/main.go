// Command orphanhost is a stand-in node for the no-orphan test: it starts
// the plugin binaries given as arguments, prints their process ids on one
// line, and waits to be killed.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sluice-daq/sluice/plugins"
)

func main() {
	for _, path := range os.Args[1:] {
		p, err := plugins.Start(context.Background(), path, plugins.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(p.Pid(), " ")
	}
	fmt.Println()
	select {}
}
