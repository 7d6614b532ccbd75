package main

import (
	"context"
	"fmt"

	"github.com/cozystack/cozy-aio/internal/demo"
)

// comparePageRuns runs the scale shape four times, the status page off,
// on with two browsers connected through the run, on, off
// (DEMO_COMPARE_PAGE=1): the page's cost in time and peak RSS, and the
// browsers' first view and update latency (BENCHMARKS.md "Status page").
func comparePageRuns(ctx context.Context, o demo.Options) error {
	browsers := o.PageBrowsers
	if browsers == 0 {
		browsers = 2
	}
	off := variant{"page off", func(o *demo.Options) { o.PageOff, o.PageBrowsers = true, 0 }}
	on := variant{fmt.Sprintf("page on, %d browsers", browsers), func(o *demo.Options) { o.PageOff, o.PageBrowsers = false, browsers }}
	return compareRuns(ctx, o, "the status page off against on with browsers, in both orders", []variant{off, on, on, off})
}
