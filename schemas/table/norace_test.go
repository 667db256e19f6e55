//go:build !race

package table

const raceDetector = false
