package builder

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// TestConfigValidate: the defaults are valid, problems are named by their
// yaml key relative to the builder section, and New refuses what Validate
// refuses, naming the same key.
func TestConfigValidate(t *testing.T) {
	if ps := Defaults().Validate(); len(ps) != 0 {
		t.Fatalf("defaults invalid: %v", ps)
	}
	c := Defaults()
	c.Mode, c.SliceDuration, c.Overlap, c.BatchEvents = schemas.ModeTimeslice, 10*time.Millisecond, 10*time.Millisecond, MaxBatchEvents+1
	want := "overlap: 10ms: want 0 <= overlap < slice_duration (10ms); batch_events: 1048577: want 1..1048576 events per batch"
	if got := c.Validate().String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	_, err := New(Config{Groups: fourSources, BatchEvents: MaxBatchEvents + 1})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "batch_events: 1048577") {
		t.Errorf("New: %v", err)
	}
}
