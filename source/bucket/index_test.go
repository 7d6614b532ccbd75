package bucket_test

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/cozystack/cozy-aio/source/bucket"
)

func TestIndexRevisionIsFluxs(t *testing.T) {
	// Flux's index digest: SHA-256 over "<key> <etag>\n" in key order;
	// the expected value is `printf 'a.yaml 0cc1…\nb/c.yaml 92eb…\n' | sha256sum`.
	ix := bucket.Index{
		"b/c.yaml": {ETag: "92eb5ffee6ae2fec3ad71c777531578f"},
		"a.yaml":   {ETag: "0cc175b9c0f1b6a831c399e269772661"},
	}
	const want = "sha256:4012d75df16c72d0555d2ac3d22c48dc034b4f9aaf7d989771fb0f10e5005f60"
	if got := ix.Revision(); got != want {
		t.Fatalf("revision %s, want %s", got, want)
	}
	ix["a.yaml"] = bucket.Entry{ETag: "changed"}
	if ix.Revision() == want {
		t.Fatal("a changed ETag must change the revision")
	}
}

func TestNewIndex(t *testing.T) {
	listed := []bucket.Listed{
		{Key: ".sourceignore", ETag: "i"},
		{Key: "apps/", ETag: "d"},
		{Key: "apps/cm.yaml", ETag: "1", Size: 10},
		{Key: "apps/README.md", ETag: "2", Size: 20},
		{Key: "apps/dev/cm.yaml", ETag: "3", Size: 30},
		{Key: ".git/config", ETag: "4", Size: 40},
		{Key: "infra/secret.enc", ETag: "5", Size: 50},
	}
	for _, tc := range []struct {
		name         string
		sourceIgnore string
		ignore       []string
		want         []string
	}{
		{name: "everything but markers and the ignore file",
			want: []string{".git/config", "apps/README.md", "apps/cm.yaml", "apps/dev/cm.yaml", "infra/secret.enc"}},
		{name: "root .sourceignore", sourceIgnore: "# docs\n*.md\n\n",
			want: []string{".git/config", "apps/cm.yaml", "apps/dev/cm.yaml", "infra/secret.enc"}},
		{name: "spec.ignore after .sourceignore, negation wins", sourceIgnore: "*.md\n", ignore: []string{"/infra/", "!apps/README.md", "dev/"},
			want: []string{".git/config", "apps/README.md", "apps/cm.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var si []byte
			if tc.sourceIgnore != "" {
				si = []byte(tc.sourceIgnore)
			}
			ix, err := bucket.NewIndex(listed, si, tc.ignore)
			if err != nil {
				t.Fatal(err)
			}
			if got := ix.Keys(); !slices.Equal(got, tc.want) {
				t.Fatalf("keys %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewIndexRefusesUnsafeKeys(t *testing.T) {
	for _, key := range []string{"../escape.yaml", "a/../../b", "/abs.yaml", "a//b", "./a", `a\..\b`} {
		_, err := bucket.NewIndex([]bucket.Listed{{Key: "ok.yaml"}, {Key: key}}, nil, nil)
		var uk *bucket.UnsafeKeyError
		if !errors.Is(err, bucket.ErrUnsafeKey) || !errors.As(err, &uk) || uk.Key != key {
			t.Errorf("key %q: got %v, want an UnsafeKeyError naming it", key, err)
		}
	}
	// An unsafe key that the rules exclude is no concern.
	if _, err := bucket.NewIndex([]bucket.Listed{{Key: "../x.md"}}, []byte("*.md\n"), nil); err != nil {
		t.Errorf("ignored unsafe key: %v", err)
	}
}

func FuzzNewIndex(f *testing.F) {
	f.Add("apps/cm.yaml", "*.md")
	f.Add("../x", "")
	f.Add("a/./b", "!a")
	f.Fuzz(func(t *testing.T, key, ignore string) {
		ix, err := bucket.NewIndex([]bucket.Listed{{Key: key, ETag: "e"}}, []byte(ignore), nil)
		if err != nil {
			return
		}
		for k := range ix {
			if !fs.ValidPath(k) || k == "." || strings.Contains(k, `\`) {
				t.Fatalf("index holds unsafe key %q", k)
			}
		}
	})
}
