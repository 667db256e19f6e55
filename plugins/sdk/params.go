package sdk

import (
	"fmt"
	"strconv"
)

// ParamFloat returns params[key] parsed as a float64, or def when the key is
// absent. The error names the key and the bad value.
func ParamFloat(params map[string]string, key string, def float64) (float64, error) {
	s, ok := params[key]
	if !ok {
		return def, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("parameter %s: %q is not a number", key, s)
	}
	return v, nil
}

// ParamUint returns params[key] parsed as an unsigned integer (decimal, or
// 0x hexadecimal), or def when the key is absent.
func ParamUint(params map[string]string, key string, def uint64) (uint64, error) {
	s, ok := params[key]
	if !ok {
		return def, nil
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("parameter %s: %q is not an unsigned integer", key, s)
	}
	return v, nil
}

// CheckParams returns an error naming the first parameter not in known, so
// that a misspelt parameter in the node's config stops the node at start-up
// instead of being ignored.
func CheckParams(params map[string]string, known ...string) error {
	for k := range params {
		found := false
		for _, n := range known {
			found = found || n == k
		}
		if !found {
			return fmt.Errorf("unknown parameter %q (known: %v)", k, known)
		}
	}
	return nil
}
