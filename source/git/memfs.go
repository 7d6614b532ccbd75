package git

import (
	"io/fs"
	"slices"
	"strings"

	"github.com/go-git/go-billy/v5"
)

// billyFS presents a go-billy file system (the in-memory work tree of a
// fetch) as an io/fs file system, so that the store archives it without
// writing the tree to disk first.
type billyFS struct{ b billy.Filesystem }

var (
	_ fs.ReadDirFS  = billyFS{}
	_ fs.ReadLinkFS = billyFS{}
)

func (f billyFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	fi, err := f.b.Stat(name)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return dirFile{fi}, nil
	}
	file, err := f.b.Open(name)
	if err != nil {
		return nil, err
	}
	return billyFile{file, fi}, nil
}

func (f billyFS) ReadDir(name string) ([]fs.DirEntry, error) {
	infos, err := f.b.ReadDir(name)
	if err != nil {
		return nil, err
	}
	entries := make([]fs.DirEntry, len(infos))
	for i, fi := range infos {
		entries[i] = fs.FileInfoToDirEntry(fi)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

func (f billyFS) ReadLink(name string) (string, error) { return f.b.Readlink(name) }

func (f billyFS) Lstat(name string) (fs.FileInfo, error) { return f.b.Lstat(name) }

type billyFile struct {
	billy.File
	fi fs.FileInfo
}

func (f billyFile) Stat() (fs.FileInfo, error) { return f.fi, nil }

type dirFile struct{ fi fs.FileInfo }

func (d dirFile) Stat() (fs.FileInfo, error) { return d.fi, nil }
func (d dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.fi.Name(), Err: fs.ErrInvalid}
}
func (d dirFile) Close() error { return nil }
