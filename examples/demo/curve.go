package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cozystack/cozy-aio/internal/demo"
)

// parseSizes reads "1000,3000,10000" as release counts, each a multiple
// of the releases per tenant.
func parseSizes(s string, perTenant int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n%perTenant != 0 {
			return nil, fmt.Errorf("curve size %q: want a positive multiple of %d releases per tenant", f, perTenant)
		}
		out = append(out, n)
	}
	return out, nil
}

// runCurve runs the scale shape once per size, prints a table and writes
// the chart to svgPath.
func runCurve(ctx context.Context, o demo.Options, sizes, svgPath string) error {
	o.Scale = true
	ns, err := parseSizes(sizes, o.Releases)
	if err != nil {
		return err
	}
	var points []demo.CurvePoint
	var speeds []string
	var errs []error
	for _, n := range ns {
		run := o
		run.Tenants = n / o.Releases
		run.WorkDir = ""
		fmt.Printf("\n==== curve: %d releases (%d tenants x %d) ====\n", n, run.Tenants, o.Releases)
		res, err := demo.Run(ctx, run)
		if err != nil {
			errs = append(errs, fmt.Errorf("%d releases: %w", n, err))
		}
		if res == nil || res.AllSettled.IsZero() {
			continue
		}
		points = append(points, demo.PointOf(n, res))
		speeds = append(speeds, fmt.Sprintf("%.0f", res.MachineSpeed))
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Printf("\n== scale curve (%s) ==\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RELEASES\tTIME TO ALL READY\tPEAK RSS\tRSS GOAL (64 MB + 8 KB/release)\tCOZY-AIO CPU\tREQUESTS\tPER RELEASE")
	for _, p := range points {
		fmt.Fprintf(tw, "%d\t%.1fs\t%.0f MB\t%.0f MB\t%.1fs\t%d\t%.2f\n", p.Releases, p.Time.Seconds(), float64(p.PeakRSS)/(1<<20),
			64+float64(p.Releases)*8/1024, p.CPU.Seconds(), p.Requests, p.PerRelease())
	}
	tw.Flush()
	if len(points) > 1 {
		first, last := points[0], points[len(points)-1]
		fmt.Printf("time ratio %d/%d releases: %.1fx for %.1fx the releases\n", last.Releases, first.Releases,
			last.Time.Seconds()/first.Time.Seconds(), float64(last.Releases)/float64(first.Releases))
	}
	fmt.Printf("machine speed before each run: %s JSON round trips/s on %d CPUs\n", strings.Join(speeds, ", "), runtime.NumCPU())
	if len(points) > 0 && svgPath != "" {
		note := fmt.Sprintf("make bench-curve, %s; machine speed %s JSON round trips/s on %d CPUs", time.Now().UTC().Format("2006-01-02"), strings.Join(speeds, "/"), runtime.NumCPU())
		if err := os.WriteFile(svgPath, demo.CurveSVG(points, "cozy-aio: HelmReleases of a 3-ConfigMap chart, all Ready from a cold start", note), 0o644); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Printf("chart: %s\n", svgPath)
		}
	}
	return errors.Join(errs...)
}

// compareDefaults runs the scale shape twice in a row: cozy-aio on its
// defaults, then with the shards and workers of o.
func compareDefaults(ctx context.Context, o demo.Options) error {
	tuned := fmt.Sprintf("--shards %d --shard-workers %d", o.Shards, o.ShardWorkers)
	rows, err := runVariants(ctx, o, []variant{
		{"defaults (no tuning flags)", func(o *demo.Options) { o.EngineDefaults = true }},
		{tuned, func(o *demo.Options) { o.EngineDefaults = false }},
	})
	fmt.Printf("\n== defaults against tuned, one after the other ==\n")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COZY-AIO\tTIME TO ALL READY\tPEAK RSS\tCPU\tREQUESTS PER RELEASE\tMACHINE SPEED")
	for _, r := range rows {
		if r.res == nil || r.res.AllSettled.IsZero() {
			fmt.Fprintf(tw, "%s\tdid not settle\t\t\t\t\n", r.name)
			continue
		}
		p := demo.PointOf(o.Tenants*o.Releases, r.res)
		fmt.Fprintf(tw, "%s\t%.1fs\t%.0f MB\t%.1fs\t%.2f\t%.0f\n", r.name, p.Time.Seconds(), float64(p.PeakRSS)/(1<<20), p.CPU.Seconds(), p.PerRelease(), r.res.MachineSpeed)
	}
	tw.Flush()
	return err
}
