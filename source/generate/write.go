package generate

import (
	"fmt"
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
	data, err := fs.ReadFile(w.fsys, src)
	if err != nil {
		return err
	}
	return w.write(dest, data, w.mode(src))
}

func (w *walker) mode(src string) os.FileMode {
	if fi, err := fs.Stat(w.fsys, src); err == nil && fi.Mode()&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

func (w *walker) write(dest string, data []byte, mode os.FileMode) error {
	if d := path.Dir(dest); d != "." {
		if err := w.c.out.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if fi, err := w.c.out.Lstat(dest); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s is a directory in the artifact", ErrInvalidPath, dest)
	}
	if err := w.c.out.WriteFile(dest, data, mode); err != nil {
		return err
	}
	w.c.files[dest] = true
	return nil
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
	return fs.WalkDir(w.c.root.FS(), dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			w.c.files[p] = true
		}
		return err
	})
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
