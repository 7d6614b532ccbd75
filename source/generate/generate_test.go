package generate_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/generate"
)

// dirSource writes files into a fresh directory and serves it through an
// os.Root, in the given order (nil: sorted).
func dirSource(t testing.TB, files map[string]string, rev string, reverse bool) generate.Source {
	t.Helper()
	dir := t.TempDir()
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if reverse {
		slices.Reverse(keys)
	}
	for _, k := range keys {
		p := filepath.Join(dir, filepath.FromSlash(k))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(files[k]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return generate.Source{FS: root.FS(), Revision: rev, OriginRevision: "origin-" + rev}
}

func fixtureSources(t testing.TB, reverse bool) map[string]generate.Source {
	t.Helper()
	depDir := t.TempDir()
	os.MkdirAll(filepath.Join(depDir, "dep"), 0o755)
	os.WriteFile(filepath.Join(depDir, "dep", "Chart.yaml"), []byte("name: dep\n"), 0o644)
	os.WriteFile(filepath.Join(depDir, "dep", "values.yaml"), []byte("x: 1\n"), 0o644)
	var dep bytes.Buffer
	if err := source.WriteArchive(context.Background(), &dep, depDir, source.ArchiveOptions{}); err != nil {
		t.Fatal(err)
	}
	return map[string]generate.Source{
		"backend": dirSource(t, map[string]string{
			"deploy/a.yaml": "a: 1\n", "deploy/sub/b.yaml": "b: 1\n", "deploy/README.md": "doc\n",
			"deploy/tests/t.yaml": "t: 1\n", "other/c.yaml": "c: 1\n",
		}, "main@sha1:1111111111111111111111111111111111111111", reverse),
		"chart": dirSource(t, map[string]string{
			"podinfo/Chart.yaml":         "name: podinfo\n",
			"podinfo/values.yaml":        "replicas: 1\nimage:\n  repository: podinfo\n  tag: 6.0.0\nports: [80, 443]\n",
			"podinfo/templates/dep.yaml": "kind: Deployment\n",
			"podinfo/charts/ignored.tgz": "not really",
		}, "6.5.0@sha256:2222222222222222222222222222222222222222222222222222222222222222", reverse),
		"values": dirSource(t, map[string]string{
			"prod.yaml": "image:\n  tag: 6.5.0\nports: [8080]\n", "list.yaml": "- a\n", "dep.tgz": dep.String(),
		}, "main@sha1:3333333333333333333333333333333333333333", reverse),
	}
}

var fixtureSpec = generate.Spec{Copy: []generate.Copy{
	{From: "@backend/deploy/", To: "@artifact/dir/"},
	{From: "@backend/deploy/**", To: "@artifact/contents/", Exclude: []string{"*.md", "tests/"}},
	{From: "@backend/deploy/*.yaml", To: "@artifact/top/"},
	{From: "@backend/deploy/a.yaml", To: "@artifact/renamed.yaml"},
	{From: "@backend/deploy/a.yaml", To: "@artifact/into/"},
	{From: "@chart/podinfo/**", To: "@artifact/chart/", Exclude: []string{"charts/"}},
	{From: "@values/prod.yaml", To: "@artifact/chart/values.yaml", Strategy: generate.Merge},
	{From: "@values/dep.tgz", To: "@artifact/chart/charts/", Strategy: generate.Extract},
}}

func TestCompose(t *testing.T) {
	dst := t.TempDir()
	res, err := generate.Compose(context.Background(), fixtureSources(t, false), fixtureSpec, dst)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"chart/Chart.yaml", "chart/charts/dep/Chart.yaml", "chart/charts/dep/values.yaml", "chart/templates/dep.yaml", "chart/values.yaml",
		"contents/a.yaml", "contents/sub/b.yaml",
		"dir/deploy/README.md", "dir/deploy/a.yaml", "dir/deploy/sub/b.yaml", "dir/deploy/tests/t.yaml",
		"into/a.yaml", "renamed.yaml", "top/a.yaml",
	}
	if !slices.Equal(res.Files, want) {
		t.Fatalf("files\n%q\nwant\n%q", res.Files, want)
	}
	got, _ := os.ReadFile(filepath.Join(dst, "chart", "values.yaml"))
	wantValues := "image:\n  repository: podinfo\n  tag: 6.5.0\nports:\n- 8080\nreplicas: 1\n"
	if string(got) != wantValues {
		t.Fatalf("merged values:\n%s\nwant:\n%s", got, wantValues)
	}
}

func TestComposeCpSemantics(t *testing.T) {
	dst := t.TempDir()
	res, err := generate.Compose(context.Background(), fixtureSources(t, false), generate.Spec{Copy: []generate.Copy{
		{From: "@backend/deploy/sub", To: "@artifact/nested"},
		{From: "@backend/", To: "@artifact/all/", Exclude: []string{"deploy"}},
		{From: "@backend/deploy/sub/", To: "@artifact/file-into-dir/"},
		{From: "@backend/deploy/a.yaml", To: "@artifact/file-into-dir/sub"}, // an existing directory: the file goes in
	}}, dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"all/other/c.yaml", "file-into-dir/sub/a.yaml", "file-into-dir/sub/b.yaml", "nested/sub/b.yaml"}; !slices.Equal(res.Files, want) {
		t.Fatalf("files %q, want %q", res.Files, want)
	}
}

func TestComposeErrors(t *testing.T) {
	srcs := fixtureSources(t, false)
	cases := []struct {
		name string
		spec generate.Spec
		want error
	}{
		{"missing alias", generate.Spec{Copy: []generate.Copy{{From: "@nope/a", To: "@artifact/"}}}, generate.ErrUnknownAlias},
		{"missing revision alias", generate.Spec{Revision: "@nope", Copy: []generate.Copy{{From: "@backend/deploy/a.yaml", To: "@artifact/"}}}, generate.ErrUnknownAlias},
		{"glob matches nothing", generate.Spec{Copy: []generate.Copy{{From: "@backend/deploy/*.json", To: "@artifact/"}}}, generate.ErrNoMatch},
		{"glob under missing dir", generate.Spec{Copy: []generate.Copy{{From: "@backend/nope/**", To: "@artifact/"}}}, generate.ErrNoMatch},
		{"missing file", generate.Spec{Copy: []generate.Copy{{From: "@backend/nope.yaml", To: "@artifact/"}}}, generate.ErrNoMatch},
		{"file with slash", generate.Spec{Copy: []generate.Copy{{From: "@backend/deploy/a.yaml/", To: "@artifact/"}}}, generate.ErrNoMatch},
		{"escaping from", generate.Spec{Copy: []generate.Copy{{From: "@backend/../etc/passwd", To: "@artifact/"}}}, generate.ErrInvalidPath},
		{"escaping to", generate.Spec{Copy: []generate.Copy{{From: "@backend/deploy/a.yaml", To: "@artifact/../x"}}}, generate.ErrInvalidPath},
		{"bad to prefix", generate.Spec{Copy: []generate.Copy{{From: "@backend/deploy/a.yaml", To: "/tmp/x"}}}, generate.ErrInvalidPath},
		{"file to root", generate.Spec{Copy: []generate.Copy{{From: "@backend/deploy/a.yaml", To: "@artifact"}}}, generate.ErrInvalidPath},
		{"extract non-tarball", generate.Spec{Copy: []generate.Copy{{From: "@values/prod.yaml", To: "@artifact/", Strategy: generate.Extract}}}, generate.ErrNotArchive},
		{"every match excluded", generate.Spec{Copy: []generate.Copy{{From: "@backend/deploy/*.md", To: "@artifact/", Exclude: []string{"*.md"}}}}, generate.ErrNoMatch},
		{"bad glob", generate.Spec{Copy: []generate.Copy{{From: "@backend/[", To: "@artifact/"}}}, generate.ErrInvalidPath},
		{"bad exclude", generate.Spec{Copy: []generate.Copy{{From: "@backend/**", To: "@artifact/", Exclude: []string{"[*.md"}}}}, generate.ErrInvalidPath},
		{"merge a list", generate.Spec{Copy: []generate.Copy{
			{From: "@values/prod.yaml", To: "@artifact/v.yaml"},
			{From: "@values/list.yaml", To: "@artifact/v.yaml", Strategy: generate.Merge}}}, generate.ErrMerge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := generate.Compose(context.Background(), srcs, tc.spec, t.TempDir())
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// An optional operation that matches nothing is skipped; the others run.
func TestComposeOptionalSkipsNoMatch(t *testing.T) {
	srcs := fixtureSources(t, false)
	for _, op := range []generate.Copy{
		{From: "@backend/deploy/*.json", To: "@artifact/", Optional: true},
		{From: "@backend/nope.yaml", To: "@artifact/", Optional: true},
		{From: "@backend/deploy/*.md", To: "@artifact/", Exclude: []string{"*.md"}, Optional: true},
	} {
		res, err := generate.Compose(context.Background(), srcs, generate.Spec{Copy: []generate.Copy{
			op, {From: "@backend/deploy/a.yaml", To: "@artifact/"},
		}}, t.TempDir())
		if err != nil || !slices.Equal(res.Files, []string{"a.yaml"}) {
			t.Fatalf("%s: files %q, %v", op.From, res.Files, err)
		}
	}
	// Optional does not hide other errors.
	_, err := generate.Compose(context.Background(), srcs, generate.Spec{Copy: []generate.Copy{
		{From: "@values/prod.yaml", To: "@artifact/", Strategy: generate.Extract, Optional: true},
	}}, t.TempDir())
	if !errors.Is(err, generate.ErrNotArchive) {
		t.Fatalf("optional extract of a non-tarball: %v", err)
	}
}

func TestBuildDeterministicAndRevisions(t *testing.T) {
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "ExternalArtifact", Namespace: "apps", Name: "composite"}
	a1, res, err := generate.Build(context.Background(), st, obj, fixtureSources(t, false), fixtureSpec, generate.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a2, _, err := generate.Build(context.Background(), st, obj, fixtureSources(t, true), fixtureSpec, generate.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a1.Digest != a2.Digest {
		t.Fatalf("digests differ: %s %s", a1.Digest, a2.Digest)
	}
	if a1.Revision != "latest@"+a1.Digest || res.Revision != a1.Revision || !strings.HasPrefix(a1.Revision, "latest@sha256:") {
		t.Fatalf("revision %q", a1.Revision)
	}
	spec := fixtureSpec
	spec.Revision, spec.OriginRevision = "@chart", "@backend"
	a3, _, err := generate.Build(context.Background(), st, obj, fixtureSources(t, false), spec, generate.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a3.Revision != "6.5.0@sha256:"+strings.Repeat("2", 64) || a3.Digest != a1.Digest {
		t.Fatalf("revision %q digest %s", a3.Revision, a3.Digest)
	}
	if a3.Metadata[generate.OriginRevisionKey] != "origin-main@sha1:"+strings.Repeat("1", 40) {
		t.Fatalf("metadata %v", a3.Metadata)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, alias, pattern string
		err                bool
	}{
		{"@src/a/b.yaml", "src", "a/b.yaml", false},
		{"@src/dir/", "src", "dir/", false},
		{"@src/./dir//**", "src", "dir/**", false},
		{"@src/", "src", "", false},
		{"@my_src-1/x", "my_src-1", "x", false},
		{"src/a", "", "", true},
		{"@Src/a", "", "", true},
		{"@src", "", "", true},
		{"@src/a/../../b", "", "", true},
		{"@-src/a", "", "", true},
	} {
		alias, pattern, err := generate.ParseFrom(tc.in)
		if (err != nil) != tc.err || alias != tc.alias || pattern != tc.pattern {
			t.Errorf("ParseFrom(%q) = %q, %q, %v", tc.in, alias, pattern, err)
		}
	}
	for _, tc := range []struct {
		in, p    string
		dir, err bool
	}{
		{"@artifact/", "", true, false},
		{"@artifact/a/b.yaml", "a/b.yaml", false, false},
		{"@artifact/a/", "a", true, false},
		{"@artifact/a/../b", "", false, true},
		{"@artifact/*.yaml", "", false, true},
		{"@other/a", "", false, true},
	} {
		p, dir, err := generate.ParseTo(tc.in)
		if (err != nil) != tc.err || p != tc.p || dir != tc.dir {
			t.Errorf("ParseTo(%q) = %q, %v, %v", tc.in, p, dir, err)
		}
	}
}
