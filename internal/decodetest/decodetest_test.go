package decodetest

import (
	"errors"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// recorder is a testing.TB that records a failure instead of stopping.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(string, ...any) {
	r.failed = true
	panic(r)
}

// fails reports whether fn failed its recorder.
func fails(t *testing.T, fn func(tb testing.TB)) (failed bool) {
	r := &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	fn(r)
	return false
}

func TestWantAndCheck(t *testing.T) {
	de := schemas.Errorf("x", "f", 7, schemas.ErrTruncated, "")
	cases := []struct {
		name string
		fn   func(tb testing.TB)
		fail bool
	}{
		{"match", func(tb testing.TB) { Want(tb, de, schemas.ErrTruncated, 7) }, false},
		{"wrong sentinel", func(tb testing.TB) { Want(tb, de, schemas.ErrBadMagic, 7) }, true},
		{"wrong offset", func(tb testing.TB) { Want(tb, de, schemas.ErrTruncated, 8) }, true},
		{"plain error", func(tb testing.TB) { Want(tb, errors.New("x"), schemas.ErrTruncated, 7) }, true},
		{"check nil", func(tb testing.TB) { Check(tb, nil, 0) }, false},
		{"check inside", func(tb testing.TB) { Check(tb, de, 7) }, false},
		{"check outside", func(tb testing.TB) { Check(tb, de, 6) }, true},
		{"check plain", func(tb testing.TB) { Check(tb, errors.New("x"), 10) }, true},
	}
	for _, c := range cases {
		if got := fails(t, c.fn); got != c.fail {
			t.Errorf("%s: failed %v, want %v", c.name, got, c.fail)
		}
	}
}
