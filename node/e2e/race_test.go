//go:build race

package e2e

// raceDetector: TestParquetExportHugeEvents reads 3 events of 66 MiB back
// in the test process (store, Parquet, Arrow IPC): minutes under the race
// detector on a loaded machine;
// `make memory` runs it without.
const raceDetector = true
