package bucket_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/bucket"
)

// BenchmarkFetch fetches a bucket of 500 objects of 4 KiB from SeaweedFS
// three ways: every object downloaded (what Flux does on any change), one
// object changed with the others copied from the previous artifact, and an
// unchanged bucket (a listing only).
func BenchmarkFetch(b *testing.B) {
	const n, size = 500, 4 << 10
	ctx := context.Background()
	name := "bench"
	objs := map[string]string{}
	for i := range n {
		objs[fmt.Sprintf("d%02d/f%04d.yaml", i%20, i)] = fmt.Sprintf("key: %d\n", i) + strings.Repeat("x", size)
	}
	benchFill(b, name, objs)
	obj := source.Object{Kind: "Bucket", Namespace: "ns", Name: name}
	st, err := source.NewStore(b.TempDir(), source.StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	first, err := bucket.Fetch(ctx, st, obj, name, bucket.Options{Server: server()})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("all-objects-downloaded", func(b *testing.B) {
		for b.Loop() {
			if _, err := bucket.Fetch(ctx, st, obj, name, bucket.Options{Server: server()}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-changed-rest-reused", func(b *testing.B) {
		prev := first
		i := 0
		for b.Loop() {
			b.StopTimer()
			i++
			if err := s3.Put(ctx, name, "d00/f0000.yaml", fmt.Sprintf("changed: %d\n", i)); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			res, err := bucket.Fetch(ctx, st, obj, name, bucket.Options{Server: server(), LastRevision: prev.Revision, Reuse: prev.Artifact})
			if err != nil || res.Downloaded != 1 {
				b.Fatalf("downloaded %d: %v", res.Downloaded, err)
			}
			prev = res
		}
	})
	b.Run("unchanged-listing-only", func(b *testing.B) {
		last, err := bucket.List(ctx, name, bucket.Options{Server: server()})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			res, err := bucket.Fetch(ctx, st, obj, name, bucket.Options{Server: server(), LastRevision: last.Revision})
			if err != nil || !res.Unchanged {
				b.Fatalf("unchanged %v: %v", res.Unchanged, err)
			}
		}
	})
}

func benchFill(b *testing.B, name string, objs map[string]string) {
	b.Helper()
	s3Once.Do(startS3)
	if s3Err != nil {
		b.Fatal(s3Err)
	}
	ctx := context.Background()
	if err := s3.MakeBucket(ctx, name); err != nil {
		b.Fatal(err)
	}
	for k, v := range objs {
		if err := s3.Put(ctx, name, k, v); err != nil {
			b.Fatal(err)
		}
	}
}
