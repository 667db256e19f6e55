// Command notplugin is an ordinary program, not a plugin: it prints a line
// and exits.
package main

import "fmt"

func main() { fmt.Println("hello, I am not a plugin") }
