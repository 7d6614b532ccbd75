package source

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// GC applies retention to an object's artifacts: it keeps current and,
// newest first, the others younger than RetentionTTL until
// RetentionRecords artifacts remain, and deletes the rest along with any
// temporary files left by an interrupted write. It returns the paths it
// deleted.
func (s *Store) GC(ctx context.Context, obj Object, current Artifact) ([]string, error) {
	dir, err := obj.dir()
	if err != nil {
		return nil, err
	}
	unlock, err := s.lockDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	entries, err := os.ReadDir(filepath.Join(s.root, filepath.FromSlash(dir)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	type file struct {
		name string
		mod  time.Time
	}
	var files []file
	var removed []string
	remove := func(name string) error {
		rel := path.Join(dir, name)
		if err := os.Remove(filepath.Join(s.root, filepath.FromSlash(rel))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed = append(removed, rel)
		return nil
	}
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), ".tmp-"):
			// Holding the lock, no write of this object is in flight.
			if err := remove(e.Name()); err != nil {
				return removed, err
			}
		case e.Type().IsRegular() && !strings.HasPrefix(e.Name(), "."):
			if fi, err := e.Info(); err == nil {
				files = append(files, file{e.Name(), fi.ModTime()})
			}
		}
	}
	slices.SortFunc(files, func(a, b file) int {
		if c := b.mod.Compare(a.mod); c != 0 {
			return c
		}
		return strings.Compare(b.name, a.name)
	})
	keepName := path.Base(current.Path)
	kept, now := 0, s.opts.Now()
	if current.Path != "" && slices.ContainsFunc(files, func(f file) bool { return f.name == keepName }) {
		kept = 1
	}
	for _, f := range files {
		if f.name == keepName {
			continue
		}
		if kept < s.opts.RetentionRecords && now.Sub(f.mod) <= s.opts.RetentionTTL {
			kept++
			continue
		}
		if err := remove(f.name); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// Remove deletes every artifact of an object, as when the object is deleted.
func (s *Store) Remove(ctx context.Context, obj Object) error {
	dir, err := obj.dir()
	if err != nil {
		return err
	}
	unlock, err := s.lockDir(ctx, dir)
	if err != nil {
		return err
	}
	defer unlock()
	return os.RemoveAll(filepath.Join(s.root, filepath.FromSlash(dir)))
}

// GCOrphans deletes the directories of objects that are not in live, and
// any file that does not sit in an object directory. It returns the paths
// it deleted, relative to the store root.
func (s *Store) GCOrphans(ctx context.Context, live []Object) ([]string, error) {
	keep := map[string]bool{}
	for _, o := range live {
		if d, err := o.dir(); err == nil {
			keep[d] = true
		}
	}
	var removed []string
	for _, kind := range readDir(s.root) {
		for _, ns := range readDir(filepath.Join(s.root, kind)) {
			for _, name := range readDir(filepath.Join(s.root, kind, ns)) {
				if err := ctx.Err(); err != nil {
					return removed, err
				}
				d := path.Join(kind, ns, name)
				if keep[d] {
					continue
				}
				if err := s.removeDir(ctx, d); err != nil {
					return removed, err
				}
				removed = append(removed, d)
			}
			_ = os.Remove(filepath.Join(s.root, kind, ns)) // only when empty
		}
		_ = os.Remove(filepath.Join(s.root, kind))
	}
	return removed, nil
}

func (s *Store) removeDir(ctx context.Context, d string) error {
	unlock, err := s.lockDir(ctx, d)
	if err != nil {
		return err
	}
	defer unlock()
	return os.RemoveAll(filepath.Join(s.root, filepath.FromSlash(d)))
}

// readDir lists the names in dir, ignoring errors: GC of a tree being
// changed concurrently is best effort.
func readDir(dir string) []string {
	entries, _ := os.ReadDir(dir)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
