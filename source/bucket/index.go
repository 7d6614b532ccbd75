package bucket

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/sourceignore"
	"github.com/fluxcd/pkg/sourceignore/gitignore"
)

// IgnoreFile is the object at the bucket's root whose patterns exclude keys
// from the index, as in Flux.
const IgnoreFile = sourceignore.IgnoreFile

// Entry is one indexed object.
type Entry struct {
	// ETag is the object's ETag as the S3 API lists it, without quotes.
	ETag string
	// Size is the object's size in bytes.
	Size int64
}

// Index maps the object keys of a bucket (after the prefix and ignore
// rules) to their entries. Its Revision is Flux's revision of the bucket.
type Index map[string]Entry

// Listed is one object as the S3 API lists it.
type Listed struct {
	Key  string
	ETag string
	Size int64
}

// Revision returns the digest of the index as Flux computes it: SHA-256
// over one "<key> <etag>\n" line per object in key order, "sha256:<hex>".
func (ix Index) Revision() string {
	h := sha256.New()
	_, _ = ix.WriteTo(h)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// WriteTo writes the lines the revision is the digest of.
func (ix Index) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, k := range ix.Keys() {
		m, err := fmt.Fprintf(w, "%s %s\n", k, ix[k].ETag)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Keys returns the keys in order.
func (ix Index) Keys() []string {
	keys := make([]string, 0, len(ix))
	for k := range ix {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Size is the total size of the indexed objects.
func (ix Index) Size() int64 {
	var n int64
	for _, e := range ix {
		n += e.Size
	}
	return n
}

// NewIndex builds the index of listed objects as Flux does: directory
// markers (keys ending in "/") and the root .sourceignore are left out, and
// so are the keys that the patterns of sourceIgnore (the root
// .sourceignore's content, nil when absent) and then ignore (.gitignore
// syntax, one pattern a line) exclude. A remaining key that is not a clean
// relative path fails with ErrUnsafeKey.
func NewIndex(listed []Listed, sourceIgnore []byte, ignore []string) (Index, error) {
	ps := sourceignore.ReadPatterns(bytes.NewReader(sourceIgnore), nil)
	ps = append(ps, sourceignore.ReadPatterns(strings.NewReader(strings.Join(ignore, "\n")), nil)...)
	m := gitignore.NewMatcher(ps)
	ix := make(Index, len(listed))
	for _, o := range listed {
		if strings.HasSuffix(o.Key, "/") || o.Key == IgnoreFile || m.Match(strings.Split(o.Key, "/"), false) {
			continue
		}
		if !fs.ValidPath(o.Key) || o.Key == "." || strings.Contains(o.Key, `\`) {
			return nil, &UnsafeKeyError{Key: o.Key}
		}
		ix[o.Key] = Entry{ETag: o.ETag, Size: o.Size}
	}
	return ix, nil
}
