package engine

import "github.com/cozystack/cozy-aio/engine/internal/frame"

// UnsupportedFieldReason is the Ready reason of an object that sets a spec
// field the engine does not honour yet. Such an object is never reconciled
// as if the field were absent.
const UnsupportedFieldReason = frame.UnsupportedFieldReason
