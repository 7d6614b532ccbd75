package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// StoreOptions configures NewStore. The zero value gives Flux's defaults.
type StoreOptions struct {
	// BaseURL prefixes the URL of every artifact; it is the address the
	// HTTP server is reached at. Default: "http://127.0.0.1:9090".
	BaseURL string
	// RetentionTTL is how long GC keeps an artifact that is not the
	// current one. Default: 60s, as Flux's --artifact-retention-ttl.
	RetentionTTL time.Duration
	// RetentionRecords is how many artifacts per object GC keeps, the
	// current one included. Default: 2, as Flux's
	// --artifact-retention-records.
	RetentionRecords int
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
}

// Store is a content-addressed artifact store on local disk. Each object
// owns a directory <kind>/<namespace>/<name>/ holding files named
// <sha256>.tar.gz. Writes go to a hidden temporary file that is renamed
// into place, so readers and the HTTP server only ever see complete
// artifacts. Writers of one object are serialised; writers of different
// objects run in parallel. The store expects to be the only process
// writing below its root.
type Store struct {
	root string
	opts StoreOptions

	mu    sync.Mutex
	locks map[string]chan struct{}
}

// NewStore opens, creating it if needed, a store rooted at dir.
func NewStore(dir string, opts StoreOptions) (*Store, error) {
	if opts.BaseURL == "" {
		opts.BaseURL = "http://127.0.0.1:9090"
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	if opts.RetentionTTL == 0 {
		opts.RetentionTTL = 60 * time.Second
	}
	if opts.RetentionRecords <= 0 {
		opts.RetentionRecords = 2
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("creating the store: %w", err)
	}
	return &Store{root: abs, opts: opts, locks: map[string]chan struct{}{}}, nil
}

// Root returns the absolute directory of the store.
func (s *Store) Root() string { return s.root }

// Lock takes the writer lock of an object and returns its release. Store
// methods that write take it themselves; callers take it to make a longer
// sequence (fetch, store, GC) exclusive.
func (s *Store) Lock(ctx context.Context, obj Object) (unlock func(), err error) {
	dir, err := obj.dir()
	if err != nil {
		return nil, err
	}
	return s.lockDir(ctx, dir)
}

func (s *Store) lockDir(ctx context.Context, dir string) (func(), error) {
	s.mu.Lock()
	ch, ok := s.locks[dir]
	if !ok {
		ch = make(chan struct{}, 1)
		s.locks[dir] = ch
	}
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// BaseURL is the prefix of the URLs of the store's artifacts.
func (s *Store) BaseURL() string { return s.opts.BaseURL }

// Path returns the local file of an artifact.
func (s *Store) Path(a Artifact) string { return filepath.Join(s.root, filepath.FromSlash(a.Path)) }

// Exists reports whether the artifact's file is in the store.
func (s *Store) Exists(a Artifact) bool {
	if a.Path == "" {
		return false
	}
	fi, err := os.Stat(s.Path(a))
	return err == nil && fi.Mode().IsRegular()
}

// Archive builds a deterministic tar.gz of dir (see WriteArchive) and
// stores it as the object's artifact with the given revision.
func (s *Store) Archive(ctx context.Context, obj Object, dir, revision string, opts ArchiveOptions) (Artifact, error) {
	return s.write(ctx, obj, revision, "*.tar.gz", func(w io.Writer) error { return WriteArchive(ctx, w, dir, opts) })
}

// ArchiveFS is Archive over a file system (see WriteArchiveFS).
func (s *Store) ArchiveFS(ctx context.Context, obj Object, fsys fs.FS, revision string, opts ArchiveOptions) (Artifact, error) {
	return s.write(ctx, obj, revision, "*.tar.gz", func(w io.Writer) error { return WriteArchiveFS(ctx, w, fsys, opts) })
}

// Put stores the content of r, which must already be a tar.gz, as the
// object's artifact with the given revision.
func (s *Store) Put(ctx context.Context, obj Object, revision string, r io.Reader) (Artifact, error) {
	return s.PutFile(ctx, obj, revision, "*.tar.gz", r)
}

// PutFile stores the content of r as the object's artifact with the given
// revision, in a file named by pattern with its "*" replaced by the
// content's hex digest ("index-*.yaml" for a Helm repository index, as
// Flux names it). The pattern must hold one "*" and no "/".
func (s *Store) PutFile(ctx context.Context, obj Object, revision, pattern string, r io.Reader) (Artifact, error) {
	if strings.Count(pattern, "*") != 1 || strings.ContainsAny(pattern, `/\`) || strings.HasPrefix(pattern, ".") {
		return Artifact{}, fmt.Errorf("storing artifact of %s: invalid file pattern %q", obj, pattern)
	}
	return s.write(ctx, obj, revision, pattern, func(w io.Writer) error {
		_, err := io.Copy(w, r)
		return err
	})
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func (s *Store) write(ctx context.Context, obj Object, revision, pattern string, fill func(io.Writer) error) (Artifact, error) {
	dir, err := obj.dir()
	if err != nil {
		return Artifact{}, err
	}
	abs := filepath.Join(s.root, filepath.FromSlash(dir))
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return Artifact{}, err
	}
	unlock, err := s.lockDir(ctx, dir)
	if err != nil {
		return Artifact{}, err
	}
	defer unlock()
	tmp, err := os.CreateTemp(abs, ".tmp-*")
	if err != nil {
		return Artifact{}, err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	h, n := sha256.New(), &countWriter{}
	err = fill(io.MultiWriter(tmp, h, n))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("storing artifact of %s: %w", obj, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	rel := path.Join(dir, strings.Replace(pattern, "*", sum, 1))
	final := filepath.Join(s.root, filepath.FromSlash(rel))
	if err := os.Rename(tmp.Name(), final); err != nil {
		return Artifact{}, fmt.Errorf("storing artifact of %s: %w", obj, err)
	}
	now := s.opts.Now()
	_ = os.Chtimes(final, now, now) // retention orders by mtime; same content refreshes it
	return Artifact{
		Path: rel, URL: s.opts.BaseURL + "/" + rel, Revision: revision,
		Digest: "sha256:" + sum, Size: n.n, LastUpdateTime: now,
	}, nil
}

// Local returns a as this store holds it for obj: the file named by a's
// digest, which is where an artifact fetched from another server (its
// status path names the file as that server does) is kept. ok is false
// when the store lacks it.
func (s *Store) Local(obj Object, a Artifact) (local Artifact, ok bool) {
	dir, err := obj.dir()
	hex, found := strings.CutPrefix(a.Digest, "sha256:")
	if err != nil || !found || hex == "" || strings.ContainsAny(hex, `/\.`) {
		return Artifact{}, false
	}
	local = a
	local.Path = path.Join(dir, hex+".tar.gz")
	local.URL = s.opts.BaseURL + "/" + local.Path
	if !s.Exists(local) {
		return Artifact{}, false
	}
	return local, true
}

// Open opens an artifact for reading.
func (s *Store) Open(a Artifact) (*os.File, error) {
	f, err := os.Open(s.Path(a))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, a.Path)
	}
	return f, err
}

// Verify hashes the artifact's file and compares it with a.Digest.
func (s *Store) Verify(a Artifact) error {
	f, err := s.Open(a)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	return checkDigest(a, h.Sum(nil))
}

func checkDigest(a Artifact, sum []byte) error {
	if got := "sha256:" + hex.EncodeToString(sum); got != a.Digest {
		return fmt.Errorf("%w: %s is %s, want %s", ErrDigestMismatch, a.Path, got, a.Digest)
	}
	return nil
}

// Extract unpacks an artifact into dir (see Extract) and verifies, once
// the whole file is read, that it still has its digest.
func (s *Store) Extract(ctx context.Context, a Artifact, dir string, opts ExtractOptions) error {
	f, err := s.Open(a)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	tee := io.TeeReader(f, h)
	if err := Extract(ctx, tee, dir, opts); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return err
	}
	return checkDigest(a, h.Sum(nil))
}
