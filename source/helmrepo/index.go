package helmrepo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/internal/redact"
	"github.com/cozystack/cozy-aio/source"
)

// ErrInvalidIndex means an index.yaml could not be read as a Helm
// repository index.
var ErrInvalidIndex = errors.New("invalid Helm repository index")

// IndexResult is the outcome of FetchIndex.
type IndexResult struct {
	// Unchanged is true when the index still has the digest the caller
	// holds: nothing was stored, and Artifact is zero.
	Unchanged bool
	// Downloaded is false when the server answered 304 Not Modified.
	Downloaded bool
	// Digest is the index's digest, "sha256:<hex>"; it is also the
	// artifact's revision, as in Flux.
	Digest string
	// Artifact is the stored index.yaml.
	Artifact source.Artifact
}

// parsedIndex is an index as Helm's types hold it.
type parsedIndex struct {
	index *repo.IndexFile
}

// IndexURL returns the URL of a repository's index.yaml.
func IndexURL(repoURL string) string {
	return strings.TrimSuffix(repoURL, "/") + "/index.yaml"
}

// FetchIndex downloads repoURL's index.yaml and, unless its digest is
// lastDigest, stores it as obj's artifact (index-<hex>.yaml). When the
// server said what the index it sent last looked like (ETag,
// Last-Modified) and lastDigest is that index, the request is
// conditional and a 304 downloads nothing. An index that Helm cannot read
// or that is larger than opts.MaxIndexSize is refused and not stored. It
// does not apply retention.
func (c *Client) FetchIndex(ctx context.Context, store *source.Store, obj source.Object, repoURL, lastDigest string, opts Options) (IndexResult, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	u := IndexURL(repoURL)
	key := obj.String() + "\x00" + u
	c.mu.Lock()
	v := c.validators[key]
	c.mu.Unlock()
	header := http.Header{}
	if lastDigest != "" && v.digest == lastDigest {
		if v.etag != "" {
			header.Set("If-None-Match", v.etag)
		}
		if v.lastModified != "" {
			header.Set("If-Modified-Since", v.lastModified)
		}
	}
	resp, done, err := get(ctx, u, opts, true, header)
	if err != nil {
		return IndexResult{}, fmt.Errorf("%s: fetching index: %w", obj, err)
	}
	defer done()
	if resp.StatusCode == http.StatusNotModified {
		if len(header) == 0 {
			return IndexResult{}, fmt.Errorf("%s: GET %s: 304 Not Modified to an unconditional request", obj, redact.String(u))
		}
		return IndexResult{Unchanged: true, Digest: lastDigest}, nil
	}
	b, err := readBody(resp, opts.maxIndexSize(), "index "+redact.String(u), "MaxIndexSize")
	if err != nil {
		return IndexResult{}, fmt.Errorf("%s: %w", obj, err)
	}
	digest := "sha256:" + source.SHA256Hex(b)
	remember := func() {
		c.mu.Lock()
		c.validators[key] = validator{digest: digest, etag: resp.Header.Get("ETag"), lastModified: settledLastModified(resp.Header)}
		c.mu.Unlock()
	}
	if digest == lastDigest {
		// The caller's artifact was parsed when it was stored.
		remember()
		return IndexResult{Unchanged: true, Downloaded: true, Digest: digest}, nil
	}
	idx, err := ParseIndex(b)
	if err != nil {
		return IndexResult{}, fmt.Errorf("%s: index %s: %w", obj, redact.String(u), err)
	}
	c.indexes.put(digest, &parsedIndex{index: idx}, int64(len(b)))
	remember()
	art, err := store.PutFile(ctx, obj, digest, "index-*.yaml", bytes.NewReader(b))
	if err != nil {
		return IndexResult{}, err
	}
	return IndexResult{Downloaded: true, Digest: digest, Artifact: art}, nil
}

// Index returns the parsed index of a stored index artifact, from memory
// when its digest was parsed lately. The returned index is shared: do
// not modify it.
func (c *Client) Index(store *source.Store, art source.Artifact) (*repo.IndexFile, error) {
	if p, ok := c.indexes.get(art.Digest); ok {
		return p.index, nil
	}
	f, err := store.Open(art)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// An index was at most MaxIndexSize when it was stored, whatever that
	// caller's limit was; this only keeps a damaged store from filling
	// memory.
	b, err := io.ReadAll(io.LimitReader(f, DefaultMaxIndexSize*4+1))
	if err != nil {
		return nil, err
	}
	if len(b) > DefaultMaxIndexSize*4 {
		return nil, fmt.Errorf("stored index %s is more than %d bytes: %w", art.Path, DefaultMaxIndexSize*4, source.ErrTooLarge)
	}
	if got := "sha256:" + source.SHA256Hex(b); got != art.Digest {
		return nil, fmt.Errorf("%w: %s is %s, want %s", source.ErrDigestMismatch, art.Path, got, art.Digest)
	}
	idx, err := ParseIndex(b)
	if err != nil {
		return nil, fmt.Errorf("stored index %s: %w", art.Path, err)
	}
	c.indexes.put(art.Digest, &parsedIndex{index: idx}, int64(len(b)))
	return idx, nil
}

// ParseIndex reads an index.yaml (YAML or JSON) with Helm's types, as
// Helm and Flux load it: entries that fail Helm's validation are dropped,
// and each chart's versions are sorted newest first.
func ParseIndex(b []byte) (*repo.IndexFile, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidIndex, repo.ErrEmptyIndexYaml)
	}
	idx := &repo.IndexFile{}
	var err error
	if json.Valid(b) {
		err = json.Unmarshal(b, idx)
	} else {
		err = yaml.UnmarshalStrict(b, idx)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidIndex, err)
	}
	if idx.APIVersion == "" {
		return nil, fmt.Errorf("%w: %w", ErrInvalidIndex, repo.ErrNoAPIVersion)
	}
	for name, cvs := range idx.Entries {
		kept := cvs[:0]
		for _, cv := range cvs {
			if cv == nil {
				continue
			}
			if cv.Metadata == nil {
				cv.Metadata = &chartv2.Metadata{}
			}
			if cv.APIVersion == "" {
				cv.APIVersion = chartv2.APIVersionV1
			}
			if cv.Validate() != nil {
				continue
			}
			kept = append(kept, cv)
		}
		idx.Entries[name] = kept
	}
	idx.SortEntries()
	return idx, nil
}

// settledLastModified returns the Last-Modified of a response when it can
// be trusted for If-Modified-Since: HTTP dates have a resolution of one
// second, so an index written in the second the response was sent may
// change again within that second unseen. Such a Last-Modified is not
// used; the next fetch downloads and compares the digest instead.
func settledLastModified(h http.Header) string {
	lm, err := http.ParseTime(h.Get("Last-Modified"))
	if err != nil {
		return ""
	}
	date, err := http.ParseTime(h.Get("Date"))
	if err != nil || date.Sub(lm) < 2*time.Second {
		return ""
	}
	return h.Get("Last-Modified")
}
