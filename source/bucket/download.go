package bucket

import (
	"context"
	"crypto/md5" //nolint:gosec // S3 ETags of single-part objects are MD5 digests.
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/cozystack/cozy-aio/source"
)

// store builds the artifact of the listing: objects the previous artifact
// holds are copied from it, the others downloaded, then the tree is
// archived verbatim (the index already applied the ignore rules).
func (l *listing) store(ctx context.Context, store *source.Store, obj source.Object, opts Options) (Result, error) {
	if max := opts.maxSize(); max >= 0 && l.index.Size() > max {
		return Result{}, fmt.Errorf("%s: %w: the objects total %d bytes, more than the limit of %d bytes (MaxSize)", l.where, source.ErrTooLarge, l.index.Size(), max)
	}
	dir, err := os.MkdirTemp("", "cozy-bucket-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	// Flux downloads the root .sourceignore into the tree it archives.
	if l.sourceIgnore != nil {
		if err := root.WriteFile(IgnoreFile, l.sourceIgnore, 0o644); err != nil {
			return Result{}, err
		}
	}
	reused, err := l.reuse(ctx, store, root, opts.Reuse)
	if err != nil {
		return Result{}, err
	}
	var todo []string
	lim := limit{max: opts.maxSize()}
	if lim.max >= 0 {
		lim.left = new(atomic.Int64)
		lim.left.Store(lim.max)
	}
	for _, k := range l.index.Keys() {
		switch {
		case !reused[k]:
			todo = append(todo, k)
		case lim.left != nil:
			lim.left.Add(-l.index[k].Size)
		}
	}
	if err := l.download(ctx, root, todo, lim, opts); err != nil {
		return Result{}, err
	}
	rev := l.index.Revision()
	a, err := store.Archive(ctx, obj, dir, rev, source.ArchiveOptions{Verbatim: true})
	if err != nil {
		return Result{}, err
	}
	return Result{Revision: rev, Index: l.index, Artifact: a, Downloaded: len(todo), Reused: len(reused)}, nil
}

// reuse copies into root the files of the previous artifact whose MD5 is
// the ETag the index lists for their key, and returns those keys. A
// previous artifact that is missing or unreadable only means that every
// object is downloaded.
func (l *listing) reuse(ctx context.Context, store *source.Store, root *os.Root, prev source.Artifact) (map[string]bool, error) {
	out := map[string]bool{}
	if prev.Path == "" || !store.Exists(prev) {
		return out, nil
	}
	pdir, err := os.MkdirTemp("", "cozy-bucket-prev-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(pdir)
	if err := store.Extract(ctx, prev, pdir, source.ExtractOptions{}); err != nil {
		return out, nil
	}
	for _, k := range l.index.Keys() {
		etag := l.index[k].ETag
		if !isMD5(etag) {
			continue
		}
		src := filepath.Join(pdir, filepath.FromSlash(k))
		if fi, err := os.Lstat(src); err != nil || !fi.Mode().IsRegular() || fi.Size() != l.index[k].Size {
			continue
		}
		if sum, err := md5File(src); err != nil || sum != strings.ToLower(etag) {
			continue
		}
		if err := mkParent(root, k); err != nil {
			return nil, err
		}
		if err := os.Rename(src, filepath.Join(root.Name(), filepath.FromSlash(k))); err != nil {
			return nil, err
		}
		out[k] = true
	}
	return out, nil
}

// limit is Options.MaxSize as the downloads apply it.
type limit struct {
	max int64 // negative: no limit
	// left is what the downloads may still write, shared by them; nil
	// without a limit.
	left *atomic.Int64
}

// take reserves size bytes for an object, or fails with
// source.ErrTooLarge.
func (lim limit) take(size int64) error {
	switch {
	case lim.max < 0:
		return nil
	case size > lim.max:
		return fmt.Errorf("%w: the object is %d bytes, more than the limit of %d bytes (MaxSize)", source.ErrTooLarge, size, lim.max)
	case lim.left.Add(-size) < 0:
		return fmt.Errorf("%w: the object is %d bytes, which takes the objects past the limit of %d bytes (MaxSize): they grew after the listing",
			source.ErrTooLarge, size, lim.max)
	}
	return nil
}

// download fetches keys into root, opts.Concurrency at a time. An object
// deleted since the listing leaves the index; one replaced since takes
// the ETag it was downloaded with, as in Flux.
func (l *listing) download(ctx context.Context, root *os.Root, keys []string, lim limit, opts Options) error {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	// The goroutines update the index under mu; read what they need first.
	entries := make([]Entry, len(keys))
	for i, k := range keys {
		entries[i] = l.index[k]
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.concurrency())
	for i, k := range keys {
		listed := entries[i]
		g.Go(func() error {
			etag, err := l.get(gctx, root, k, lim)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case isNotFound(err):
				delete(l.index, k)
				return nil
			case err != nil:
				return fetcher.Classify(gctx, l.where, fmt.Errorf("object '%s': %w", k, err))
			case etag != listed.ETag:
				listed.ETag = etag
				l.index[k] = listed
			}
			return nil
		})
	}
	return g.Wait()
}

// get writes one object to root and returns the ETag it came with. An
// object is refused when its size, which may have grown since the
// listing, does not fit the limit; no more than its size is read.
func (l *listing) get(ctx context.Context, root *os.Root, key string, lim limit) (string, error) {
	o, err := l.c.GetObject(ctx, l.name, key, minio.GetObjectOptions{})
	if err != nil {
		return "", err
	}
	defer o.Close()
	info, err := o.Stat()
	if err != nil {
		return "", err
	}
	if err := lim.take(info.Size); err != nil {
		return "", err
	}
	if err := mkParent(root, key); err != nil {
		return "", err
	}
	f, err := root.OpenFile(key, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	n, err := io.Copy(f, io.LimitReader(o, info.Size+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != info.Size {
		err = fmt.Errorf("got %d bytes, the object has %d", n, info.Size)
	}
	return info.ETag, err
}

func mkParent(root *os.Root, key string) error {
	d := path.Dir(key)
	if d == "." {
		return nil
	}
	if err := root.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("object key %q: %w", key, err)
	}
	return nil
}

func isMD5(etag string) bool {
	if len(etag) != 32 {
		return false
	}
	_, err := hex.DecodeString(etag)
	return err == nil
}

func md5File(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := md5.New() //nolint:gosec // compared with an S3 ETag, not used for security.
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
