package invariants

import (
	"errors"
	"testing"
)

func TestFailfPanicsWithViolation(t *testing.T) {
	defer func() {
		r := recover()
		v, ok := r.(Violation)
		if !ok {
			t.Fatalf("recovered %T %v, want Violation", r, r)
		}
		if v.Where != "ring" || v.What != "head 3 > tail 2" {
			t.Fatalf("violation %+v", v)
		}
		var err error = v
		if !errors.As(err, &v) || err.Error() != "invariant violated in ring: head 3 > tail 2" {
			t.Fatalf("error text %q", err.Error())
		}
	}()
	Failf("ring", "head %d > tail %d", 3, 2)
}
