package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/cozystack/cozy-aio/internal/demo"
)

// variant is one run of a comparison: its name and how it changes the
// options.
type variant struct {
	name  string
	apply func(*demo.Options)
}

// compareRemote runs the scale shape four times, local, remote, remote,
// local: the same tenants' releases of the same chart, in the management
// cluster, then each tenant's deployed through spec.kubeConfig to a
// tenant cluster of its own (DEMO_COMPARE_REMOTE=1). Every run starts the
// tenant clusters.
func compareRemote(ctx context.Context, o demo.Options) error {
	// The local runs start the same tenant clusters and leave them idle:
	// twenty API servers take a share of the machine's two cores whether
	// or not cozy-aio talks to them.
	local := variant{fmt.Sprintf("local (%d tenant clusters running, unused)", o.Tenants), func(o *demo.Options) {
		o.Clusters, o.ClustersUnused, o.ClusterDown = o.Tenants, true, demo.ClusterDownNone
	}}
	remote := variant{fmt.Sprintf("remote (%d tenant clusters)", o.Tenants), func(o *demo.Options) {
		o.Clusters, o.ClusterDown = o.Tenants, demo.ClusterDownNone
	}}
	return compareRuns(ctx, o, "local against remote releases, one after the other in both orders",
		[]variant{local, remote, remote, local})
}

// compareClusterDown runs the scale shape with every tenant's releases on
// a tenant cluster of its own four times: all up, the last one down from
// the start, again, all up (DEMO_COMPARE_DOWN=1). The figure to compare is
// the time until every release of the clusters that are up is Ready.
func compareClusterDown(ctx context.Context, o demo.Options) error {
	up := variant{fmt.Sprintf("%d tenant clusters up", o.Tenants), func(o *demo.Options) {
		o.Clusters, o.ClusterDown = o.Tenants, demo.ClusterDownNone
	}}
	down := variant{fmt.Sprintf("%d up, 1 down from the start", o.Tenants-1), func(o *demo.Options) {
		o.Clusters, o.ClusterDown = o.Tenants, demo.ClusterDownStart
	}}
	return compareRuns(ctx, o, "one tenant cluster down against all up, one after the other in both orders",
		[]variant{up, down, down, up})
}

// compareFlux runs the scale shape with every tenant's releases on a
// tenant cluster of its own four times: cozy-aio, Flux's source-controller
// and helm-controller (binaries in dir, built from their module source),
// again, cozy-aio (DEMO_COMPARE_FLUX=1).
func compareFlux(ctx context.Context, o demo.Options, dir string) error {
	if dir == "" {
		return errors.New("-compare-flux needs -flux-dir (DEMO_FLUX_DIR): a directory with source-controller and helm-controller")
	}
	f := fluxControllers(dir)
	for _, b := range []string{f.SourceController, f.HelmController} {
		if _, err := os.Stat(b); err != nil {
			return err
		}
	}
	cozy := variant{fmt.Sprintf("cozy-aio (%d tenant clusters)", o.Tenants), func(o *demo.Options) {
		o.Clusters, o.ClusterDown = o.Tenants, demo.ClusterDownNone
	}}
	flux := variant{fmt.Sprintf("Flux source- and helm-controller (%d tenant clusters)", o.Tenants), func(o *demo.Options) {
		o.Clusters, o.ClusterDown, o.Flux = o.Tenants, demo.ClusterDownNone, f
	}}
	return compareRuns(ctx, o, "cozy-aio against Flux on remote releases, one after the other in both orders",
		[]variant{cozy, flux, flux, cozy})
}

// fluxControllers are Flux's source-controller and helm-controller in dir.
func fluxControllers(dir string) *demo.FluxControllers {
	return &demo.FluxControllers{SourceController: filepath.Join(dir, "source-controller"), HelmController: filepath.Join(dir, "helm-controller")}
}

func compareRuns(ctx context.Context, o demo.Options, title string, variants []variant) error {
	rows, err := runVariants(ctx, o, variants)
	releases := o.Tenants * o.Releases
	fmt.Printf("\n== %s: %d tenants × %d releases ==\n", title, o.Tenants, o.Releases)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tUP RELEASES READY\tALL SETTLED\tPEAK RSS\tCPU\tMGMT REQUESTS PER RELEASE\tTENANT REQUESTS PER REMOTE RELEASE\tMACHINE SPEED")
	for _, r := range rows {
		if r.res == nil || r.res.AllSettled.IsZero() {
			fmt.Fprintf(tw, "%s\tdid not settle\t\t\t\t\t\t\n", r.name)
			continue
		}
		p := demo.PointOf(releases, r.res)
		remote, ready := 0, time.Duration(0)
		if !r.res.UpReady.IsZero() {
			ready = r.res.UpReady.Sub(r.res.CozyStarted)
		}
		for _, c := range r.res.Clusters {
			remote += c.Releases
		}
		tenant := "-"
		if remote > 0 {
			tenant = fmt.Sprintf("%.2f", float64(r.res.RemoteRequests)/float64(remote))
		}
		fmt.Fprintf(tw, "%s\t%.1fs\t%.1fs\t%.0f MB\t%.1fs\t%.2f\t%s\t%.0f\n", r.name, ready.Seconds(), p.Time.Seconds(),
			float64(p.PeakRSS)/(1<<20), p.CPU.Seconds(), p.PerRelease(), tenant, r.res.MachineSpeed)
	}
	tw.Flush()
	for _, r := range rows {
		if r.res != nil && r.res.Page != nil {
			fmt.Printf("%s: %s\n", r.name, r.res.Page)
		}
	}
	return err
}

// ranVariant is the result of one variant's run; res is nil when the run
// did not start.
type ranVariant struct {
	name string
	res  *demo.Result
}

// runVariants runs the scale shape once per variant, one after the other,
// each in a work directory of its own, and returns every run's result
// with the errors of the runs that failed.
func runVariants(ctx context.Context, o demo.Options, variants []variant) ([]ranVariant, error) {
	o.Scale = true
	var rows []ranVariant
	var errs []error
	for i, v := range variants {
		run := o
		run.WorkDir = ""
		v.apply(&run)
		name := v.name
		if len(variants) > 2 {
			name = fmt.Sprintf("%d. %s", i+1, v.name)
		}
		fmt.Printf("\n==== %s ====\n", name)
		res, err := demo.Run(ctx, run)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		rows = append(rows, ranVariant{name, res})
		if ctx.Err() != nil {
			break
		}
	}
	return rows, errors.Join(errs...)
}
