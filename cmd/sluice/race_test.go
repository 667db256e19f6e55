//go:build race

package main

// raceDetector: the race detector's build of sluice is what a test would
// measure; `make memory` runs the resident-memory test without it.
const raceDetector = true
