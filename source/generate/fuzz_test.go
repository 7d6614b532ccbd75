package generate_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/cozystack/cozy-aio/source/generate"
)

// FuzzCopyPaths feeds arbitrary From, To and Exclude strings through the
// parsers and a real composition with each strategy, each into a fresh
// directory beside an empty sentinel one. Parsed paths and the files of
// the result never climb out of their root; nothing is written outside
// the output, the sentinel stays empty and no symlink in the output
// points out of it; every file of the result is there; the output holds
// no more bytes than the sources could give (Compose has no size option
// of its own); and, but for Merge, every file of the output is a byte for
// byte copy of a source file or of a file in a source archive.
func FuzzCopyPaths(f *testing.F) {
	seeds := [][3]string{
		{"@src/a/b.yaml", "@artifact/", ""},
		{"@src/a/", "@artifact/out/", "*.md"},
		{"@src/a/**", "@artifact/x", "c/"},
		{"@src/**/*.yaml", "@artifact/y/", "a/c/**"},
		{"@src/../etc/passwd", "@artifact/", ""},
		{"@src/a/b.yaml", "@artifact/../../x", ""},
		{"@src/[a-", "@artifact/z", "["},
		{"@src/a/*/../..", "@artifact//./", "**/**"},
		{"@src/pkg/app.tgz", "@artifact/app/", ""},
		{"@src/**/*.tgz", "@artifact/", ""},
		{"@src/evil/link.tgz", "@artifact/x/", ""},
		{"@src/evil/up.tgz", "@artifact/", ""},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	const values = "replicas: 1\n"
	files := map[string][]byte{
		"a/b.yaml":    []byte("b: 1\n"),
		"a/c/d.yaml":  []byte("d: 1\n"),
		"a/README.md": []byte("x"),
		"top.yaml":    []byte("t: 1\n"),
		"pkg/pkg.tgz": []byte("not a tarball"),
		"pkg/app.tgz": tgz(f, tarEntry{name: "app/values.yaml", body: values},
			tarEntry{name: "app/link", link: "values.yaml"}),
		// An archive whose symlink leaves the output, and one whose entry
		// climbs out of it: Extract refuses both.
		"evil/link.tgz": tgz(f, tarEntry{name: "l", link: "../../sentinel"}),
		"evil/up.tgz":   tgz(f, tarEntry{name: "../sentinel/evil", body: "x"}),
	}
	fsys := fstest.MapFS{}
	budget := int64(len(values)) // what app.tgz unpacks to
	copies := map[string]bool{values: true}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: data}
		budget += int64(len(data))
		copies[string(data)] = true
	}
	srcs := map[string]generate.Source{"src": {FS: fsys, Revision: "r"}}
	f.Fuzz(func(t *testing.T, from, to, exclude string) {
		if len(from)+len(to)+len(exclude) > 512 {
			return
		}
		if _, p, err := generate.ParseFrom(from); err == nil {
			checkRel(t, p)
		}
		if p, _, err := generate.ParseTo(to); err == nil {
			checkRel(t, p)
		}
		for _, strategy := range []generate.Strategy{generate.Overwrite, generate.Merge, generate.Extract} {
			parent := t.TempDir()
			if err := os.Mkdir(filepath.Join(parent, "sentinel"), 0o755); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(parent, "out")
			spec := generate.Spec{Copy: []generate.Copy{{From: from, To: to, Exclude: []string{exclude}, Strategy: strategy}}}
			res, err := generate.Compose(context.Background(), srcs, spec, out)
			contents := copies
			if strategy == generate.Merge {
				contents = nil // a merge writes YAML of its own
			}
			if size := checkConfined(t, parent, contents); size > budget {
				t.Fatalf("%s: %d bytes written, more than the %d the sources hold", strategy, size, budget)
			}
			if err != nil {
				continue
			}
			for _, p := range res.Files {
				checkRel(t, p)
				if fi, err := os.Lstat(filepath.Join(out, filepath.FromSlash(p))); err != nil || fi.IsDir() {
					t.Fatalf("%s: the result lists %s, which is not a file of the output (%v)", strategy, p, err)
				}
			}
		}
	})
}

func checkRel(t *testing.T, p string) {
	t.Helper()
	if strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
		t.Fatalf("path %q escapes its root", p)
	}
}

// checkConfined fails when parent holds anything but the "out" directory
// and an empty "sentinel" directory, when a symlink in out resolves,
// lexically from where it lies, outside out, or, unless contents is nil,
// when a file of out holds none of contents. It returns the bytes of the
// regular files in out.
func checkConfined(t *testing.T, parent string, contents map[string]bool) int64 {
	t.Helper()
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if e.Name() != "out" && e.Name() != "sentinel" {
			t.Fatalf("wrote %s outside the output", e.Name())
		}
	}
	if in, _ := os.ReadDir(filepath.Join(parent, "sentinel")); len(in) > 0 {
		t.Fatalf("wrote %s into a sibling of the output", in[0].Name())
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
			if data, err := os.ReadFile(p); err != nil || contents != nil && !contents[string(data)] {
				t.Fatalf("%s is no copy of a source file: %q (%v)", p, data, err)
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			if rel, err := filepath.Rel(out, target); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Fatalf("symlink %s points outside the output, to %s", p, target)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return size
}

// tarEntry is a file of a tgz, or a symlink when link is set.
type tarEntry struct{ name, link, body string }

func tgz(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body))}
		if e.link != "" {
			hdr = &tar.Header{Name: e.name, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: e.link}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
