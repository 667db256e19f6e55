//go:build race

package table

// raceDetector: TestParquetHugeEvents takes minutes under the race
// detector; `make memory` runs it without.
const raceDetector = true
