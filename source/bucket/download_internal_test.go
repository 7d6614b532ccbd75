package bucket

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cozystack/cozy-aio/source"
)

// TestLimitTake checks MaxSize as the downloads apply it, to objects
// whose size at download may differ from the listing's.
func TestLimitTake(t *testing.T) {
	capped := func(max int64) limit {
		l := limit{max: max, left: new(atomic.Int64)}
		l.left.Store(max)
		return l
	}
	for _, tc := range []struct {
		name  string
		lim   limit
		sizes []int64
		err   string // of the last take; "" for none
	}{
		{"no limit", limit{max: -1}, []int64{1 << 40, 1 << 40}, ""},
		{"objects that fit", capped(100), []int64{40, 60}, ""},
		{"an object over the limit", capped(100), []int64{101}, "the object is 101 bytes, more than the limit of 100 bytes (MaxSize)"},
		{"objects that grew past the limit together", capped(100), []int64{60, 41}, "the object is 41 bytes, which takes the objects past the limit of 100 bytes (MaxSize)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			for i, s := range tc.sizes {
				err = tc.lim.take(s)
				if err != nil && i != len(tc.sizes)-1 {
					t.Fatalf("take(%d): %v", s, err)
				}
			}
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("got %v", err)
			case tc.err != "" && (!errors.Is(err, source.ErrTooLarge) || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got %v, want ErrTooLarge saying %q", err, tc.err)
			}
		})
	}
}
