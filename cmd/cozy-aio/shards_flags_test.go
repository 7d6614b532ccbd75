package main

import (
	"io"
	"testing"
)

// With no tuning flags cozy-aio runs 4 shards of 4 Helm workers, the
// concurrency bench-scale measured the API server to take; auto is asked
// for by name.
func TestShardDefaultsAreTheMeasuredConcurrency(t *testing.T) {
	f, err := parseRun(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.opts.Engine.Shards != 4 || f.opts.Engine.ShardWorkers != 4 {
		t.Fatalf("defaults: %d shards × %d workers, want 4 × 4", f.opts.Engine.Shards, f.opts.Engine.ShardWorkers)
	}
	f, err = parseRun([]string{"--shards", "auto"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.opts.Engine.Shards != 0 {
		t.Fatalf("--shards auto: Shards %d, want 0 (the engine's automatic count)", f.opts.Engine.Shards)
	}
}
