package generate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/cozystack/cozy-aio/source/generate"
)

// FuzzCopyPaths feeds arbitrary From, To and Exclude strings through the
// parsers and a real composition, and checks that parsed paths never
// climb out of their root and that nothing is written outside the output.
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
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	fsys := fstest.MapFS{
		"a/b.yaml":    {Data: []byte("b: 1\n")},
		"a/c/d.yaml":  {Data: []byte("d: 1\n")},
		"a/README.md": {Data: []byte("x")},
		"top.yaml":    {Data: []byte("t: 1\n")},
		"pkg/pkg.tgz": {Data: []byte("not a tarball")},
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
		parent := t.TempDir()
		for _, strategy := range []generate.Strategy{generate.Overwrite, generate.Merge, generate.Extract} {
			spec := generate.Spec{Copy: []generate.Copy{{From: from, To: to, Exclude: []string{exclude}, Strategy: strategy}}}
			res, err := generate.Compose(context.Background(), srcs, spec, filepath.Join(parent, "out"))
			if err == nil {
				for _, p := range res.Files {
					checkRel(t, p)
				}
			}
		}
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.Name() != "out" {
				t.Fatalf("wrote %s outside the output", e.Name())
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
