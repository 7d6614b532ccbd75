package git

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/go-git/go-billy/v5"
)

// Include is a tree copied into the work tree before it is archived, as
// Flux's GitRepository spec.include copies the artifact of another
// GitRepository.
type Include struct {
	// Name names the include in errors (Flux: the included repository).
	Name string
	// FS is the tree, for example an extracted artifact.
	FS fs.FS
	// FromPath is the directory of FS to copy. Default: its root.
	FromPath string
	// ToPath is the directory of the work tree the files land in; files
	// already there with the same names are replaced. Default: the root.
	ToPath string
}

// ErrIncludePath means an include's fromPath is not a directory of the
// included tree.
var ErrIncludePath = errors.New("not a directory of the included artifact")

// copyIncludes copies each include into wt, in order. Paths are cleaned
// to stay inside the trees ("../x" is "x"), as Flux's secure joins do.
func copyIncludes(wt billy.Filesystem, incs []Include) error {
	for _, in := range incs {
		if err := copyInclude(wt, in); err != nil {
			return fmt.Errorf("include %q from %q to %q: %w", in.Name, in.FromPath, in.ToPath, err)
		}
	}
	return nil
}

func copyInclude(wt billy.Filesystem, in Include) error {
	from, to := insidePath(in.FromPath), insidePath(in.ToPath)
	fi, err := fs.Stat(in.FS, from)
	if err != nil || !fi.IsDir() {
		return ErrIncludePath
	}
	return fs.WalkDir(in.FS, from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, from), "/")
		if from == "." {
			rel = p
		}
		dst := path.Join(to, rel)
		switch t := d.Type(); {
		case t.IsDir():
			return wt.MkdirAll(dst, 0o755)
		case t&fs.ModeSymlink != 0:
			target, err := fs.ReadLink(in.FS, p)
			if err != nil {
				return err
			}
			_ = wt.Remove(dst)
			return wt.Symlink(target, dst)
		case t.IsRegular():
			return copyFile(wt, in.FS, p, dst)
		}
		return nil // devices and the like: the archive holds none
	})
}

func copyFile(wt billy.Filesystem, fsys fs.FS, src, dst string) error {
	r, err := fsys.Open(src)
	if err != nil {
		return err
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil {
		return err
	}
	_ = wt.Remove(dst) // a symlink there is replaced, never written through
	w, err := wt.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// insidePath cleans p into a relative path that stays inside its root;
// "." for the root.
func insidePath(p string) string {
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" {
		return "."
	}
	return c
}
