package bucket

import (
	"context"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/cozystack/cozy-aio/source"
)

// maxIgnoreFile bounds the root .sourceignore that is read into memory.
const maxIgnoreFile = 1 << 20

// Result is the outcome of List, Fetch and FetchRevision.
type Result struct {
	// Revision is the digest of Index, "sha256:<hex>".
	Revision string
	// Index is the bucket's objects after the prefix and ignore rules.
	Index Index
	// Unchanged is true when Revision equals Options.LastRevision: no
	// object was downloaded and Artifact is zero.
	Unchanged bool
	// Artifact is the stored artifact (Fetch and FetchRevision).
	Artifact source.Artifact
	// Downloaded counts the objects downloaded, and Reused those copied
	// from Options.Reuse instead.
	Downloaded, Reused int
}

// List returns the bucket's index and revision. It reads the root
// .sourceignore, and no other object.
func List(ctx context.Context, bucketName string, opts Options) (Result, error) {
	l, err := connect(ctx, bucketName, opts)
	if err != nil {
		return Result{}, err
	}
	defer l.release()
	return Result{Revision: l.index.Revision(), Index: l.index}, nil
}

// Fetch lists the bucket and, unless its revision equals
// opts.LastRevision, stores its objects as obj's artifact. It does not
// apply retention: call store.GC once the artifact is recorded.
func Fetch(ctx context.Context, store *source.Store, obj source.Object, bucketName string, opts Options) (Result, error) {
	l, err := connect(ctx, bucketName, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	defer l.release()
	if rev := l.index.Revision(); opts.LastRevision != "" && rev == opts.LastRevision {
		return Result{Revision: rev, Index: l.index, Unchanged: true}, nil
	}
	res, err := l.store(ctx, store, obj, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	return res, nil
}

// FetchRevision stores obj's artifact for exactly revision, a revision
// Fetch returned. The bucket keeps no history: it fails with
// ErrRevisionGone unless the bucket still lists to that revision.
// opts.LastRevision is not used.
func FetchRevision(ctx context.Context, store *source.Store, obj source.Object, bucketName, revision string, opts Options) (Result, error) {
	l, err := connect(ctx, bucketName, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	defer l.release()
	if got := l.index.Revision(); got != revision {
		return Result{}, fmt.Errorf("%s: %s: %w: it lists to %s, want %s", obj, l.where, ErrRevisionGone, got, revision)
	}
	res, err := l.store(ctx, store, obj, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	if res.Revision != revision {
		return Result{}, fmt.Errorf("%s: %s: %w: objects changed while downloading", obj, l.where, ErrRevisionGone)
	}
	return res, nil
}

// listing is a bucket that was found and listed.
type listing struct {
	c            *minio.Client
	release      func() // closes c's connections
	name, where  string
	index        Index
	sourceIgnore []byte // nil when the bucket has no root .sourceignore
}

// connect checks that the bucket exists, reads its root .sourceignore and
// lists it into an index.
func connect(ctx context.Context, bucketName string, opts Options) (*listing, error) {
	where := fmt.Sprintf("bucket '%s' at %s", bucketName, opts.Endpoint)
	c, release, err := newClient(opts.Server)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	l, err := list(ctx, c, bucketName, where, opts)
	if err != nil {
		release()
		return nil, err
	}
	l.release = release
	return l, nil
}

func list(ctx context.Context, c *minio.Client, bucketName, where string, opts Options) (*listing, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	exists, err := c.BucketExists(ctx, bucketName)
	if err != nil {
		return nil, fetcher.Classify(ctx, where, err)
	}
	if !exists {
		return nil, fmt.Errorf("%s: %w: bucket '%s' not found", where, source.ErrRefNotFound, bucketName)
	}
	ignore, err := readIgnoreFile(ctx, c, bucketName)
	if err != nil {
		return nil, fetcher.Classify(ctx, where, err)
	}
	var listed []Listed
	for o := range c.ListObjects(ctx, bucketName, minio.ListObjectsOptions{
		Prefix: opts.Prefix, Recursive: true, UseV1: s3utils.IsGoogleEndpoint(*c.EndpointURL()),
	}) {
		if o.Err != nil {
			return nil, fetcher.Classify(ctx, where, fmt.Errorf("listing objects: %w", o.Err))
		}
		listed = append(listed, Listed{Key: o.Key, ETag: o.ETag, Size: o.Size})
	}
	ix, err := NewIndex(listed, ignore, opts.Ignore)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return &listing{c: c, name: bucketName, where: where, index: ix, sourceIgnore: ignore}, nil
}

// readIgnoreFile returns the root .sourceignore, or nil when there is none.
func readIgnoreFile(ctx context.Context, c *minio.Client, bucketName string) ([]byte, error) {
	o, err := c.GetObject(ctx, bucketName, IgnoreFile, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer o.Close()
	b, err := io.ReadAll(io.LimitReader(o, maxIgnoreFile+1))
	switch {
	case isNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", IgnoreFile, err)
	case len(b) > maxIgnoreFile:
		return nil, fmt.Errorf("%s: %w: more than %d bytes", IgnoreFile, source.ErrTooLarge, maxIgnoreFile)
	}
	return b, nil
}
