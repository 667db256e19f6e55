//go:build race

package peertest

// slack multiplies the suite's time bounds under the race detector, which
// slows every goroutine wake-up (and `make test` runs all packages at once
// on two cores): SIGKILL detection measured 2–12 ms without it, up to
// ~180 ms with it on a loaded machine.
const slack = 3
