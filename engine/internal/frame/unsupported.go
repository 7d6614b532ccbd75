package frame

import (
	"fmt"
	"strings"
)

// UnsupportedFieldReason is the Ready reason of an object that sets a spec
// field the engine does not honour yet. Such an object is never reconciled
// as if the field were absent.
const UnsupportedFieldReason = "UnsupportedField"

// unsupportedError names the fields set that are not honoured.
type unsupportedError struct {
	kind   string
	fields []string
}

func (e *unsupportedError) Error() string {
	return fmt.Sprintf("%s sets fields cozy-aio does not honour yet: %s (see docs/support.md)", e.kind, strings.Join(e.fields, ", "))
}

// unsupported returns an error when any check is true; each check is a
// field path and whether the object sets it.
func Unsupported(kind string, checks ...FieldCheck) error {
	var set []string
	for _, c := range checks {
		if c.Set {
			set = append(set, c.Path)
		}
	}
	if len(set) == 0 {
		return nil
	}
	return &unsupportedError{kind: kind, fields: set}
}

type FieldCheck struct {
	Path string
	Set  bool
}
