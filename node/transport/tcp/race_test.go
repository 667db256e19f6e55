//go:build race

package tcp

// raceDetector: the race detector's shadow memory swamps the resident
// memory TestManyStreamsMemory measures; `make memory` runs it without.
const raceDetector = true
