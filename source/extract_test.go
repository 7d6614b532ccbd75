package source_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cozystack/cozy-aio/source"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzExtract from the malicious corpus")

type entry struct {
	name, link string
	typ        byte
	body       string
	size       int64 // overrides len(body) in the header when set
}

func mkTar(t testing.TB, gz bool, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	var tw *tar.Writer
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	} else {
		tw = tar.NewWriter(&buf)
	}
	for _, e := range entries {
		if e.typ == 0 {
			e.typ = tar.TypeReg
		}
		size := int64(len(e.body))
		if e.typ != tar.TypeReg {
			size = 0
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: size}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

// maliciousCorpus is the set of archives Extract must refuse, each with
// its named error.
func maliciousCorpus(t testing.TB) []struct {
	name string
	tar  []byte
	want error
} {
	big := bytes.Repeat([]byte("x"), 2048)
	return []struct {
		name string
		tar  []byte
		want error
	}{
		{"dotdot", mkTar(t, true, entry{name: "../evil", body: "x"}), source.ErrPathTraversal},
		{"dotdot-nested", mkTar(t, true, entry{name: "a/../../evil", body: "x"}), source.ErrPathTraversal},
		{"dotdot-backslash", mkTar(t, true, entry{name: `a\..\..\evil`, body: "x"}), source.ErrPathTraversal},
		{"absolute", mkTar(t, true, entry{name: "/tmp/evil", body: "x"}), source.ErrAbsolutePath},
		{"symlink-out", mkTar(t, true, entry{name: "l", link: "../../etc", typ: tar.TypeSymlink}), source.ErrSymlinkEscape},
		{"symlink-abs", mkTar(t, true, entry{name: "l", link: "/etc/passwd", typ: tar.TypeSymlink}), source.ErrSymlinkEscape},
		{"symlink-chain", mkTar(t, true,
			entry{name: "x", link: ".", typ: tar.TypeSymlink},
			entry{name: "x/y/l", link: "../../q", typ: tar.TypeSymlink}), source.ErrSymlinkEscape},
		{"write-through-symlink", mkTar(t, true,
			entry{name: "d", link: "sub", typ: tar.TypeSymlink},
			entry{name: "d/f", body: "x"}), source.ErrSymlinkEscape},
		{"hardlink-out", mkTar(t, true, entry{name: "h", link: "../../etc/passwd", typ: tar.TypeLink}), source.ErrPathTraversal},
		{"char-device", mkTar(t, true, entry{name: "dev", typ: tar.TypeChar}), source.ErrDeviceFile},
		{"block-device", mkTar(t, true, entry{name: "dev", typ: tar.TypeBlock}), source.ErrDeviceFile},
		{"fifo", mkTar(t, false, entry{name: "fifo", typ: tar.TypeFifo}), source.ErrDeviceFile},
		{"oversized", mkTar(t, true, entry{name: "a", body: string(big)}, entry{name: "b", body: string(big)}), source.ErrTooLarge},
	}
}

func TestExtractRejectsMaliciousArchives(t *testing.T) {
	for _, tc := range maliciousCorpus(t) {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "out")
			err := source.Extract(context.Background(), bytes.NewReader(tc.tar), dst, source.ExtractOptions{MaxSize: 3000})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var ae *source.ArchiveError
			if !errors.As(err, &ae) || ae.Entry == "" {
				t.Fatalf("error %v does not name the entry", err)
			}
			assertConfined(t, parent)
		})
	}
	if *updateCorpus {
		dir := filepath.Join("testdata", "fuzz", "FuzzExtract")
		os.MkdirAll(dir, 0o755)
		for _, tc := range maliciousCorpus(t) {
			data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(tc.tar)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, tc.name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// assertConfined fails when anything but the "out" directory and an empty
// "sentinel" directory is in parent, or when a symlink in out resolves,
// lexically from where it lies, outside out. It returns the bytes of the
// regular files in out.
func assertConfined(t testing.TB, parent string) int64 {
	t.Helper()
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if e.Name() != "out" && e.Name() != "sentinel" {
			t.Fatalf("extraction wrote %s outside its root", e.Name())
		}
	}
	if in, _ := os.ReadDir(filepath.Join(parent, "sentinel")); len(in) > 0 {
		t.Fatalf("extraction wrote %s into a sibling of its root", in[0].Name())
	}
	out := filepath.Join(parent, "out")
	var size int64
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode().IsRegular():
			size += fi.Size()
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			if rel, err := filepath.Rel(out, target); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Fatalf("symlink %s points outside the root, to %s", p, target)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return size
}

func TestExtractGood(t *testing.T) {
	tgz := mkTar(t, true,
		entry{name: "./", typ: tar.TypeDir},
		entry{name: "dir/", typ: tar.TypeDir},
		entry{name: "dir/a.yaml", body: "a: 1\n"},
		entry{name: "dir/link", link: "a.yaml", typ: tar.TypeSymlink},
		entry{name: "up", link: "dir/../dir/a.yaml", typ: tar.TypeSymlink},
		entry{name: "hard", link: "dir/a.yaml", typ: tar.TypeLink},
		entry{name: "dir/a.yaml", body: "a: 2\n"}, // a later entry replaces an earlier one
	)
	dst := t.TempDir()
	if err := source.Extract(context.Background(), bytes.NewReader(tgz), dst, source.ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"dir/a.yaml": "a: 2\n", "dir/link": "a: 2\n", "hard": "a: 1\n"} {
		b, err := os.ReadFile(filepath.Join(dst, p))
		if err != nil || string(b) != want {
			t.Fatalf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
}

// fuzzMaxSize is FuzzExtract's limit, small enough for the fuzzer to pass.
const fuzzMaxSize = 3000

// FuzzExtract extracts arbitrary archives next to an empty sentinel
// directory and checks what landed on disk: nothing outside the target,
// the sentinel still empty, no symlink in the target pointing out of it,
// at most fuzzMaxSize bytes of files. When Extract succeeds, a reading of
// the archive of its own finds no entry that Extract must refuse: an
// absolute path or a ".." segment, a symlink resolving outside, a device
// or FIFO, or more file content than the limit.
func FuzzExtract(f *testing.F) {
	for _, tc := range maliciousCorpus(f) {
		f.Add(tc.tar)
	}
	f.Add(mkTar(f, true, entry{name: "a/b/c", body: "x"}, entry{name: "a/l", link: "b", typ: tar.TypeSymlink}))
	// A ".." that cleans to a path inside, refused all the same.
	f.Add(mkTar(f, false, entry{name: "a/../b", body: "x"}))
	f.Add(mkTar(f, false, entry{name: "l", link: "a/../../x", typ: tar.TypeSymlink}))
	// Hard links are copies, which count against the limit.
	big := strings.Repeat("x", fuzzMaxSize/2)
	f.Add(mkTar(f, false, entry{name: "a", body: big},
		entry{name: "h1", link: "a", typ: tar.TypeLink}, entry{name: "h2", link: "a", typ: tar.TypeLink}))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		if err := os.Mkdir(filepath.Join(parent, "sentinel"), 0o755); err != nil {
			t.Fatal(err)
		}
		err := source.Extract(context.Background(), bytes.NewReader(data), filepath.Join(parent, "out"), source.ExtractOptions{MaxSize: fuzzMaxSize})
		if size := assertConfined(t, parent); size > fuzzMaxSize {
			t.Fatalf("%d bytes written, more than the limit of %d (err: %v)", size, fuzzMaxSize, err)
		}
		if err == nil {
			assertNothingRefused(t, data)
		}
	})
}

// assertNothingRefused reads an archive that Extract accepted and fails
// on the first entry that Extract should have refused.
func assertNothingRefused(t testing.TB, data []byte) {
	t.Helper()
	var r io.Reader = bytes.NewReader(data)
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(r)
		if err != nil {
			t.Fatalf("Extract accepted a stream that is not gzip: %v", err)
		}
		r = gz
	}
	tr := tar.NewReader(r)
	var content int64
	for {
		hdr, err := tr.Next()
		if err != nil {
			return // Extract read the same entries up to here
		}
		name := strings.ReplaceAll(hdr.Name, `\`, "/")
		if strings.HasPrefix(name, "/") || slices.Contains(strings.Split(name, "/"), "..") {
			t.Fatalf("accepted the entry %q, which climbs out of the root", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // Extract reads old archives too
			if content += hdr.Size; content > fuzzMaxSize {
				t.Fatalf("accepted %d bytes of files, more than the limit of %d", content, fuzzMaxSize)
			}
		case tar.TypeSymlink:
			to := path.Join(path.Dir(path.Clean(name)), hdr.Linkname)
			if path.IsAbs(hdr.Linkname) || to == ".." || strings.HasPrefix(to, "../") {
				t.Fatalf("accepted the symlink %q -> %q, which resolves outside the root", hdr.Name, hdr.Linkname)
			}
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			if path.Clean(name) != "." {
				t.Fatalf("accepted the device or FIFO %q", hdr.Name)
			}
		}
	}
}
