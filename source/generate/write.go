package generate

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/source"
)

// file applies the strategy to the source file src, written at dest (a
// file path; for Extract, a directory).
func (w *walker) file(src, dest string) error {
	if dest == "" || dest == "." {
		if w.strategy != Extract {
			return fmt.Errorf("%w: destination of %s is the artifact root", ErrInvalidPath, src)
		}
		dest = "."
	}
	switch w.strategy {
	case Extract:
		return w.extract(src, dest)
	case Merge:
		return w.merge(src, dest)
	}
	return w.copyFile(src, dest)
}

func (w *walker) mode(src string) os.FileMode {
	fi, err := fs.Stat(w.fsys, src)
	if err != nil {
		return 0o644
	}
	return fileMode(fi)
}

func fileMode(fi fs.FileInfo) os.FileMode {
	if fi.Mode()&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// copyFile copies src to dest. Its size is accounted before it is read, so
// that a file that does not fit in the budget is never held in memory.
func (w *walker) copyFile(src, dest string) error {
	fi, err := fs.Stat(w.fsys, src)
	if err != nil {
		return err
	}
	if err := w.prepare(dest, fi.Size()); err != nil {
		return err
	}
	n, err := w.put(src, dest, fileMode(fi))
	if err != nil {
		return err
	}
	// A file that changed since its Stat is accounted as written.
	if err := w.c.meter.grow(n - fi.Size()); err != nil {
		return err
	}
	w.c.files[dest] = true
	return nil
}

// fileOpener is the capability of an output on disk (an os.Root) to take a
// file as a stream: a build on disk then holds no whole file in memory.
type fileOpener interface {
	OpenFile(name string, flag int, perm os.FileMode) (*os.File, error)
}

var _ fileOpener = (*os.Root)(nil)

// put writes the content of src at dest, as os.WriteFile does, and
// returns its size.
func (w *walker) put(src, dest string, mode os.FileMode) (int64, error) {
	to, ok := w.c.out.(fileOpener)
	if !ok {
		data, err := fs.ReadFile(w.fsys, src)
		if err != nil {
			return 0, err
		}
		return int64(len(data)), w.c.out.WriteFile(dest, data, mode)
	}
	in, err := w.fsys.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := to.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func (w *walker) write(dest string, data []byte, mode os.FileMode) error {
	if err := w.prepare(dest, int64(len(data))); err != nil {
		return err
	}
	if err := w.c.out.WriteFile(dest, data, mode); err != nil {
		return err
	}
	w.c.files[dest] = true
	return nil
}

// prepare makes dest's directory and accounts for size bytes in place of
// what dest holds.
func (w *walker) prepare(dest string, size int64) error {
	if d := path.Dir(dest); d != "." {
		if err := w.c.out.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	var old int64
	if fi, err := w.c.out.Lstat(dest); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%w: %s is a directory in the artifact", ErrInvalidPath, dest)
		}
		old = fi.Size()
	}
	return w.c.meter.grow(size - old)
}

func (w *walker) extract(src, dest string) error {
	if w.c.root == nil {
		return fmt.Errorf("extracting %s: the output is not a directory", src)
	}
	f, err := w.fsys.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	dir := filepath.Join(w.c.dstDir, filepath.FromSlash(dest))
	if err := source.Extract(w.c.ctx, f, dir, source.ExtractOptions{}); err != nil {
		return fmt.Errorf("extracting %s: %w", src, err)
	}
	err = fs.WalkDir(w.c.root.FS(), dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			w.c.files[p] = true
		}
		return err
	})
	if err != nil {
		return err
	}
	return w.recount()
}

// recount accounts for the output's files anew: a tarball (bounded by
// source.Extract's own limit) may have replaced some of them.
func (w *walker) recount() error {
	var total int64
	for f := range w.c.files {
		if fi, err := w.c.out.Lstat(f); err == nil {
			total += fi.Size()
		}
	}
	return w.c.meter.grow(total - w.c.meter.total)
}

// merge deep-merges the YAML map of src over the one at dest, as Helm
// merges values files: maps merge key by key, anything else replaces.
func (w *walker) merge(src, dest string) error {
	data, err := fs.ReadFile(w.fsys, src)
	if err != nil {
		return err
	}
	old, err := w.c.out.ReadFile(dest)
	if err != nil {
		return w.write(dest, data, w.mode(src)) // nothing to merge into
	}
	var base, over map[string]any
	if err := yaml.Unmarshal(old, &base); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMerge, dest, err)
	}
	if err := yaml.Unmarshal(data, &over); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMerge, src, err)
	}
	out, err := yaml.Marshal(mergeMaps(base, over))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMerge, dest, err)
	}
	return w.write(dest, out, w.mode(src))
}

// mergeMaps returns a merged copy of over laid on base.
func mergeMaps(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		bm, ok1 := out[k].(map[string]any)
		om, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = mergeMaps(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}
