package source_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/source"
)

func writeTree(t testing.TB, dir string, files map[string]string, order []string) {
	t.Helper()
	for _, p := range order {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(files[p]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func archiveDigest(t testing.TB, dir string, opts source.ArchiveOptions) string {
	t.Helper()
	var buf bytes.Buffer
	if err := source.WriteArchive(context.Background(), &buf, dir, opts); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

func TestArchiveDeterministic(t *testing.T) {
	files := map[string]string{
		"a.yaml": "a: 1\n", "b/c.yaml": "c: 2\n", "b/d/e.txt": "e\n", "z/y/x": "x",
	}
	order := []string{"a.yaml", "b/c.yaml", "b/d/e.txt", "z/y/x"}
	d1, d2 := t.TempDir(), t.TempDir()
	writeTree(t, d1, files, order)
	reversed := slices.Clone(order)
	slices.Reverse(reversed)
	writeTree(t, d2, files, reversed)
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, p := range order {
		if err := os.Chtimes(filepath.Join(d2, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(d2, "a.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	if a, b := archiveDigest(t, d1, source.ArchiveOptions{}), archiveDigest(t, d2, source.ArchiveOptions{}); a != b {
		t.Fatalf("digests differ: %s vs %s", a, b)
	}
	// The store names the file by the same digest.
	st, err := source.NewStore(t.TempDir(), source.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "app"}
	a1, err := st.Archive(context.Background(), obj, d1, "r1", source.ArchiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := st.Archive(context.Background(), obj, d2, "r1", source.ArchiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a1.Digest != a2.Digest || a1.Path != a2.Path || a1.Digest != "sha256:"+archiveDigest(t, d1, source.ArchiveOptions{}) {
		t.Fatalf("store artifacts differ: %+v vs %+v", a1, a2)
	}
	if err := st.Verify(a1); err != nil {
		t.Fatal(err)
	}
}

func listArchive(t testing.TB, dir string, opts source.ArchiveOptions) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := source.WriteArchive(context.Background(), &buf, dir, opts); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := source.Extract(context.Background(), &buf, out, source.ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	var names []string
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(out, p)
			names = append(names, filepath.ToSlash(rel))
		}
		return err
	})
	return names
}

func TestArchiveIgnore(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		".git/config":             "x",
		".gitignore":              "x",
		".sourceignore":           "*.md\n# comment\n/secret/\n",
		"README.md":               "x",
		"app/README.md":           "x",
		"app/deploy.yaml":         "x",
		"app/.sourceignore":       "tmp/\n!keep.md\n",
		"app/keep.md":             "x",
		"app/tmp/a.yaml":          "x",
		"other/tmp/b.yaml":        "x",
		"secret/key":              "x",
		"app/secret/not-top.yaml": "x",
		"charts/big.tgz":          "x",
	}
	var order []string
	for p := range files {
		order = append(order, p)
	}
	writeTree(t, dir, files, order)
	got := listArchive(t, dir, source.ArchiveOptions{Ignore: []string{"*.tgz"}})
	want := []string{".sourceignore", "app/.sourceignore", "app/deploy.yaml", "app/keep.md", "app/secret/not-top.yaml", "other/tmp/b.yaml"}
	if !slices.Equal(got, want) {
		t.Fatalf("archived %q, want %q", got, want)
	}
}

func TestArchiveSymlinks(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a/file": "x"}, []string{"a/file"})
	for link, target := range map[string]string{"in": "a/file", "out": "../../etc/passwd", "abs": "/etc/passwd"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := source.WriteArchive(context.Background(), &buf, dir, source.ArchiveOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, _ := tarOf(t, buf.Bytes())
	if !slices.Equal(tr, []string{"a/file", "in"}) {
		t.Fatalf("entries %q", tr)
	}
}

func tarOf(t testing.TB, tgz []byte) ([]string, error) {
	t.Helper()
	out := t.TempDir()
	if err := source.Extract(context.Background(), bytes.NewReader(tgz), out, source.ExtractOptions{}); err != nil {
		return nil, err
	}
	var names []string
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(out, p)
			names = append(names, filepath.ToSlash(rel))
		}
		return err
	})
	return names, nil
}

var _ = tar.TypeReg

func TestIgnored(t *testing.T) {
	for _, tc := range []struct {
		path string
		dir  bool
		pats []string
		want bool
	}{
		{".git", true, nil, true},
		{"a/.gitmodules", false, nil, true},
		{"a/b.yaml", false, nil, false},
		{"a/b.md", false, []string{"*.md"}, true},
		{"docs", true, []string{"docs/"}, true},
		{"docs", false, []string{"docs/"}, false},
		{"a/keep.md", false, []string{"*.md", "!keep.md"}, false},
	} {
		if got := source.Ignored(tc.path, tc.dir, tc.pats...); got != tc.want {
			t.Errorf("Ignored(%q, %v, %q) = %v", tc.path, tc.dir, tc.pats, got)
		}
	}
}
