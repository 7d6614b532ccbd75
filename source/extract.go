package source

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// DefaultMaxSize is the default limit on the content an archive may
// unpack to: 512 MiB.
const DefaultMaxSize = 512 << 20

// ExtractOptions configures Extract. The zero value applies DefaultMaxSize.
type ExtractOptions struct {
	// MaxSize limits the total bytes of file content written. Default:
	// DefaultMaxSize. A negative value means no limit.
	MaxSize int64
}

// Extract unpacks a tar archive, gzipped or not, into dir, creating dir if
// needed. It refuses, with an *ArchiveError wrapping the named error,
// entries with absolute paths (ErrAbsolutePath) or ".." segments
// (ErrPathTraversal), symlinks resolving outside dir or entries written
// through a symlink (ErrSymlinkEscape), devices and FIFOs (ErrDeviceFile),
// and content beyond the size limit (ErrTooLarge). All writes go through
// an os.Root, so nothing lands outside dir even on a bug here. On error,
// dir may hold a partial tree; callers extract into a fresh directory.
func Extract(ctx context.Context, r io.Reader, dir string, opts ExtractOptions) error {
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr, err := tarReader(r)
	if err != nil {
		return err
	}
	x := extractor{root: root, max: opts.MaxSize, symlinks: map[string]bool{}}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading archive: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return &ArchiveError{Entry: hdr.Name, Err: err}
		}
	}
}

// tarReader unwraps gzip when the stream starts with its magic number.
func tarReader(r io.Reader) (*tar.Reader, error) {
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading gzip: %w", err)
		}
		return tar.NewReader(gz), nil
	}
	return tar.NewReader(br), nil
}

type extractor struct {
	root     *os.Root
	max      int64
	total    int64
	symlinks map[string]bool
}

func (x *extractor) entry(hdr *tar.Header, tr *tar.Reader) error {
	name, err := cleanEntry(hdr.Name)
	if err != nil || name == "." {
		return err
	}
	if err := x.checkParents(name); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.root.MkdirAll(name, 0o755)
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old archives still use TypeRegA
		return x.file(name, hdr, tr)
	case tar.TypeSymlink:
		if !symlinkInside(name, hdr.Linkname) {
			return fmt.Errorf("%w: -> %s", ErrSymlinkEscape, hdr.Linkname)
		}
		if err := x.prepare(name); err != nil {
			return err
		}
		x.symlinks[name] = true
		return x.root.Symlink(hdr.Linkname, name)
	case tar.TypeLink:
		return x.hardlink(name, hdr)
	case tar.TypeXGlobalHeader:
		return nil
	default:
		return fmt.Errorf("%w: type %q", ErrDeviceFile, hdr.Typeflag)
	}
}

// cleanEntry validates an entry name and returns it cleaned.
func cleanEntry(name string) (string, error) {
	n := strings.ReplaceAll(name, `\`, "/")
	if path.IsAbs(n) || filepath.VolumeName(name) != "" || (len(n) > 1 && n[1] == ':') {
		return "", ErrAbsolutePath
	}
	for _, s := range strings.Split(n, "/") {
		if s == ".." {
			return "", ErrPathTraversal
		}
	}
	return path.Clean(n), nil
}

// checkParents refuses to write below a symlink the archive created:
// lexical checks of each link cannot see where a chain of links leads.
func (x *extractor) checkParents(name string) error {
	for p := path.Dir(name); p != "."; p = path.Dir(p) {
		if x.symlinks[p] {
			return fmt.Errorf("%w: parent %s is a symlink", ErrSymlinkEscape, p)
		}
	}
	return nil
}

// prepare creates the parent directory and removes a previous entry of the
// same name, so that a later entry replaces rather than follows it.
func (x *extractor) prepare(name string) error {
	if d := path.Dir(name); d != "." {
		if err := x.root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if fi, err := x.root.Lstat(name); err == nil && !fi.IsDir() {
		delete(x.symlinks, name)
		return x.root.Remove(name)
	}
	return nil
}

func (x *extractor) reserve(n int64) error {
	if x.max >= 0 && (n < 0 || x.total+n > x.max) {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, x.max)
	}
	x.total += n
	return nil
}

func (x *extractor) file(name string, hdr *tar.Header, r io.Reader) error {
	if err := x.reserve(hdr.Size); err != nil {
		return err
	}
	if err := x.prepare(name); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := x.root.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, r, hdr.Size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// hardlink copies the content of an earlier entry: links between files
// of the tree are kept as copies, never as links to the outside.
func (x *extractor) hardlink(name string, hdr *tar.Header) error {
	target, err := cleanEntry(hdr.Linkname)
	if err != nil {
		return err
	}
	if err := x.checkParents(target); err != nil || x.symlinks[target] {
		return fmt.Errorf("%w: hard link to %s", ErrSymlinkEscape, hdr.Linkname)
	}
	src, err := x.root.Open(target)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: hard link to %s", ErrDeviceFile, hdr.Linkname)
	}
	return x.file(name, &tar.Header{Size: fi.Size(), Mode: int64(fi.Mode().Perm())}, src)
}
