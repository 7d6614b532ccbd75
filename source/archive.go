package source

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/klauspost/compress/gzip"
)

// ArchiveOptions configures WriteArchive and Store.Archive. The zero value
// excludes VCS metadata and honours .sourceignore files.
type ArchiveOptions struct {
	// Ignore holds extra .gitignore-syntax patterns applied from the root,
	// after the VCS defaults and before the ignore files found in the tree.
	// Default: none.
	Ignore []string
	// IgnoreFile is the name of the per-directory ignore file.
	// Default: ".sourceignore".
	IgnoreFile string
	// Verbatim archives every file: no VCS defaults and no ignore files,
	// only Ignore. Composed artifacts use it. Default: false.
	Verbatim bool
}

// epoch is the modification time of every entry, so that archives of the
// same content are byte-identical.
var epoch = time.Unix(0, 0).UTC()

// WriteArchive writes the tree under dir to w as a deterministic tar.gz
// (klauspost/compress gzip, about twice as fast as compress/gzip):
// entries in lexical order, regular files with mode 0644 or 0755, symlinks
// only when they resolve inside dir, no directories, times at the Unix
// epoch, no owners. The same content always gives the same bytes.
func WriteArchive(ctx context.Context, w io.Writer, dir string, opts ArchiveOptions) error {
	return WriteArchiveFS(ctx, w, os.DirFS(dir), opts)
}

// WriteArchiveFS is WriteArchive over a file system, for trees that are
// not on disk (a Git work tree in memory). Symlinks are archived when
// fsys implements fs.ReadLinkFS.
func WriteArchiveFS(ctx context.Context, w io.Writer, fsys fs.FS, opts ArchiveOptions) error {
	if opts.IgnoreFile == "" {
		opts.IgnoreFile = IgnoreFile
	}
	defaults := vcsPatterns
	if opts.Verbatim {
		defaults = ""
	}
	ps := parsePatterns([]byte(defaults+strings.Join(opts.Ignore, "\n")), nil)
	gz, _ := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	tw := tar.NewWriter(gz)
	a := archiver{ctx: ctx, fsys: fsys, tw: tw, ignoreFile: opts.IgnoreFile}
	if opts.Verbatim {
		a.ignoreFile = ""
	}
	if err := a.walk(".", nil, ps); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

type archiver struct {
	ctx        context.Context
	fsys       fs.FS
	tw         *tar.Writer
	ignoreFile string
	buf        []byte
}

func (a *archiver) walk(dir string, segs []string, ps []gitignore.Pattern) error {
	if err := a.ctx.Err(); err != nil {
		return err
	}
	if a.ignoreFile != "" {
		if b, err := fs.ReadFile(a.fsys, path.Join(dir, a.ignoreFile)); err == nil {
			ps = append(slices.Clip(ps), parsePatterns(b, slices.Clone(segs))...)
		}
	}
	m := gitignore.NewMatcher(ps)
	entries, err := fs.ReadDir(a.fsys, dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := path.Join(dir, e.Name())
		esegs := append(slices.Clip(segs), e.Name())
		if m.Match(esegs, e.IsDir()) {
			continue
		}
		switch t := e.Type(); {
		case t.IsDir():
			err = a.walk(name, esegs, ps)
		case t.IsRegular():
			err = a.file(name)
		case t&fs.ModeSymlink != 0:
			err = a.symlink(name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (a *archiver) file(name string) error {
	f, err := a.fsys.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	mode := int64(0o644)
	if fi.Mode()&0o111 != 0 {
		mode = 0o755
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: fi.Size(), ModTime: epoch}
	if err := a.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archiving %s: %w", name, err)
	}
	if a.buf == nil {
		a.buf = make([]byte, 128<<10)
	}
	if _, err := io.CopyBuffer(a.tw, io.LimitReader(f, fi.Size()), a.buf); err != nil {
		return fmt.Errorf("archiving %s: %w", name, err)
	}
	return nil
}

// symlink archives links that stay inside the root and skips the others:
// a link to /etc/passwd in a repository must not reach a consumer.
func (a *archiver) symlink(name string) error {
	target, err := fs.ReadLink(a.fsys, name)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return err
	}
	target = filepath.ToSlash(target)
	if !symlinkInside(name, target) {
		return nil
	}
	hdr := &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: epoch}
	return a.tw.WriteHeader(hdr)
}

// symlinkInside reports whether a link at name (relative, slash-separated)
// pointing to target resolves, lexically, inside the root.
func symlinkInside(name, target string) bool {
	if target == "" || path.IsAbs(target) || strings.HasPrefix(target, `\`) || filepath.VolumeName(target) != "" {
		return false
	}
	r := path.Join(path.Dir(name), target)
	return r != ".." && !strings.HasPrefix(r, "../")
}
