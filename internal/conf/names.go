package conf

import "regexp"

// nameRe is what may become part of an Arrow column name or a metric
// label: source group and trigger stage names.
var nameRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// NameWant is the expectation reported for a name ValidName refuses.
const NameWant = "want a name of 1-32 lower-case letters, digits or _, starting with a letter"

// ValidName reports whether s can name a source group or a trigger stage.
func ValidName(s string) bool { return nameRe.MatchString(s) }
