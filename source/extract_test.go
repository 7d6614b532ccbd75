package source_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// assertConfined fails when anything but the "out" directory appeared in
// parent.
func assertConfined(t testing.TB, parent string) {
	t.Helper()
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if e.Name() != "out" {
			t.Fatalf("extraction wrote %s outside its root", e.Name())
		}
	}
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

// FuzzExtract checks that no archive makes Extract panic or write outside
// its root.
func FuzzExtract(f *testing.F) {
	for _, tc := range maliciousCorpus(f) {
		f.Add(tc.tar)
	}
	f.Add(mkTar(f, true, entry{name: "a/b/c", body: "x"}, entry{name: "a/l", link: "b", typ: tar.TypeSymlink}))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		err := source.Extract(context.Background(), bytes.NewReader(data), filepath.Join(parent, "out"), source.ExtractOptions{MaxSize: 1 << 20})
		_ = fmt.Sprint(err)
		assertConfined(t, parent)
	})
}
