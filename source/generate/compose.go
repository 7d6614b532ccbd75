package generate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// Result describes a composition.
type Result struct {
	// Revision is the source revision named by Spec.Revision; empty when
	// the spec leaves it to the output digest (Build fills it in then).
	Revision string
	// OriginRevision is the origin revision named by Spec.OriginRevision.
	OriginRevision string
	// Files lists the files of the output, sorted.
	Files []string
}

// Compose runs the spec's copy operations from sources into dst, a
// directory that is created if needed and should be empty. Nothing is
// written outside dst. The output has no cap: the caller chose where it
// goes (Build caps its own).
func Compose(ctx context.Context, sources map[string]Source, spec Spec, dst string) (Result, error) {
	res, err := revisions(sources, spec)
	if err != nil {
		return Result{}, err
	}
	return composeDir(ctx, sources, spec, res, dst, &meter{max: -1})
}

// composeDir composes into the directory dst, counting its bytes with m.
func composeDir(ctx context.Context, sources map[string]Source, spec Spec, res Result, dst string, m *meter) (Result, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return Result{}, err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	return compose(ctx, sources, spec, res, &composer{out: root, root: root, dstDir: dst, meter: m})
}

// compose runs the spec's copy operations into c's output and completes
// res, the spec's revisions, with the files written.
func compose(ctx context.Context, sources map[string]Source, spec Spec, res Result, c *composer) (Result, error) {
	c.ctx, c.files = ctx, map[string]bool{}
	for i, op := range spec.Copy {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		if err := c.run(sources, op); err != nil {
			return Result{}, &CopyError{Index: i, From: op.From, To: op.To, Err: err}
		}
	}
	for f := range c.files {
		res.Files = append(res.Files, f)
	}
	slices.Sort(res.Files)
	return res, nil
}

func revisions(sources map[string]Source, spec Spec) (Result, error) {
	var res Result
	for _, r := range []struct {
		ref string
		set func(Source)
	}{
		{spec.Revision, func(s Source) { res.Revision = s.Revision }},
		{spec.OriginRevision, func(s Source) { res.OriginRevision = s.OriginRevision }},
	} {
		if r.ref == "" {
			continue
		}
		alias, err := parseAliasRef(r.ref)
		if err != nil {
			return Result{}, err
		}
		s, ok := sources[alias]
		if !ok {
			return Result{}, fmt.Errorf("%w: %q", ErrUnknownAlias, alias)
		}
		r.set(s)
	}
	return res, nil
}

type composer struct {
	ctx context.Context
	out output
	// root and dstDir are the output directory, which Extract unpacks
	// into; nil and "" for an output in memory.
	root   *os.Root
	dstDir string
	files  map[string]bool // written files, for Result.Files
	meter  *meter
}

// run executes one operation.
func (c *composer) run(sources map[string]Source, op Copy) error {
	alias, pattern, err := ParseFrom(op.From)
	if err != nil {
		return err
	}
	to, toDir, err := ParseTo(op.To)
	if err != nil {
		return err
	}
	src, ok := sources[alias]
	if !ok || src.FS == nil {
		return fmt.Errorf("%w: %q", ErrUnknownAlias, alias)
	}
	strategy := op.Strategy
	switch strategy {
	case "":
		strategy = Overwrite
	case Overwrite, Merge, Extract:
	default:
		return fmt.Errorf("unknown strategy %q", strategy)
	}
	if err := validPatterns(pattern, op.Exclude); err != nil {
		return err
	}
	w := walker{c: c, fsys: src.FS, ex: excluder(op.Exclude), strategy: strategy}
	if hasMeta(pattern) {
		err = w.glob(pattern, to)
	} else {
		err = w.literal(pattern, to, toDir)
	}
	if op.Optional && errors.Is(err, ErrNoMatch) {
		return nil
	}
	return err
}

type walker struct {
	c        *composer
	fsys     fs.FS
	ex       excluder
	strategy Strategy
	matched  int // files matched by From
	copied   int // of which not excluded
}

// isDir reports whether p is a directory of the output already.
func (w *walker) isDir(p string) bool {
	if p == "" {
		return true
	}
	fi, err := w.c.out.Lstat(p)
	return err == nil && fi.IsDir()
}

// literal copies a file or, cp -r style, a directory.
func (w *walker) literal(pattern, to string, toDir bool) error {
	name := strings.TrimSuffix(pattern, "/")
	if name == "" {
		name = "."
	}
	fi, err := fs.Stat(w.fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNoMatch, pattern)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		if strings.HasSuffix(pattern, "/") {
			return fmt.Errorf("%w: %s is not a directory", ErrNoMatch, name)
		}
		dest := to
		if toDir || w.isDir(to) {
			dest = path.Join(to, path.Base(name))
		}
		if w.strategy == Extract {
			if !isTarball(name) {
				return fmt.Errorf("%w: %s", ErrNotArchive, name)
			}
			dest = to
		}
		if w.ex.excluded(name, path.Base(name)) {
			return nil
		}
		return w.file(name, dest)
	}
	if w.strategy == Extract {
		return fmt.Errorf("%w: %s is a directory", ErrNotArchive, name)
	}
	// cp -r into a destination that always exists: the directory lands
	// inside it, with or without trailing slashes. The source root copies
	// its contents.
	dest := to
	if name != "." {
		dest = path.Join(to, path.Base(name))
	}
	return w.tree(name, name, dest)
}

// glob copies every match of pattern, files and whole directories, at its
// path below the pattern's non-glob prefix.
func (w *walker) glob(pattern, to string) error {
	prefix := globPrefix(strings.TrimSuffix(pattern, "/"))
	start := prefix
	if start == "" {
		start = "."
	}
	err := fs.WalkDir(w.fsys, start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !match(strings.TrimSuffix(pattern, "/"), p) {
			return nil
		}
		if d.IsDir() {
			if w.strategy == Extract {
				return nil
			}
			if err := w.tree(p, prefix, to); err != nil {
				return err
			}
			return fs.SkipDir
		}
		if w.strategy == Extract && !isTarball(p) {
			return nil
		}
		return w.copyAt(p, prefix, to)
	})
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && w.matched == 0:
		return fmt.Errorf("%w: %s", ErrNoMatch, pattern)
	case err == nil && w.copied == 0:
		return fmt.Errorf("%w: every file matching %s is excluded", ErrNoMatch, pattern)
	}
	return err
}

// tree copies every file below dir to dest, at its path relative to base.
func (w *walker) tree(dir, base, dest string) error {
	return fs.WalkDir(w.fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return w.copyAt(p, base, dest)
	})
}

// copyAt copies the file p to dest joined with p's path below base.
func (w *walker) copyAt(p, base, dest string) error {
	sub := p
	if base != "" && base != "." {
		sub = strings.TrimPrefix(p, base+"/")
	}
	w.matched++
	if w.ex.excluded(p, sub) {
		return nil
	}
	w.copied++
	if w.strategy == Extract {
		return w.file(p, dest)
	}
	return w.file(p, path.Join(dest, sub))
}

func isTarball(name string) bool {
	return strings.HasSuffix(name, ".tgz") || strings.HasSuffix(name, ".tar.gz")
}
