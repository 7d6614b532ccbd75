// Command demo runs cozy-aio's main job on a simulated cluster: see
// `make demo` in the README. It exits 0 when every unit became Ready and
// every check held, 1 otherwise, naming what failed.
//
// Environment: DEMO_TENANTS (default 20), DEMO_RELEASES (default 5),
// DEMO_BREAK=1 (one tenant gets a chart that does not render),
// DEMO_SCALE=1 (the scale benchmark's shape: ConfigMap charts on a plain
// API server, no nodes), DEMO_REPLICAS (default 1; more runs that many
// cozy-aio replicas, as on that many control-plane nodes, and kills the
// leader mid-install), DEMO_CLUSTERS (default 0; that many tenant
// clusters, each its own API server with ten addon HelmReleases deployed
// through spec.kubeConfig) and DEMO_CLUSTER_DOWN (midway, the default:
// the last tenant cluster's API server is stopped midway; start: it is
// down from the start; none).
//
// The scale shape also takes DEMO_RESTART=1 (stop cozy-aio once every
// unit is Ready and start it again, with its data directory and then with
// an empty one), DEMO_IDLE (a duration: measure the idle cost at the end),
// DEMO_PROFILE (a duration: a CPU profile of cozy-aio from its start),
// DEMO_ENGINE_DEFAULTS=1 (cozy-aio without --shards and --shard-workers),
// DEMO_COMPARE_DEFAULTS=1 (two runs in a row: cozy-aio's defaults, then
// --shards 4 --shard-workers 4) and DEMO_CURVE (sizes in releases, such as
// 1000,3000,10000: one run each, and the chart DEMO_CURVE_SVG),
// DEMO_COMPARE_REMOTE=1 (four runs: local, remote, remote, local; remote
// puts each tenant's releases on a tenant cluster of its own) and
// DEMO_COMPARE_DOWN=1 (four runs with a tenant cluster per tenant: all up,
// the last one down, again, all up) and DEMO_COMPARE_FLUX=1 with
// DEMO_FLUX_DIR (four runs with a tenant cluster per tenant: cozy-aio,
// Flux's source-controller and helm-controller, again, cozy-aio).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/cozy-aio/internal/demo"
)

func main() {
	var o demo.Options
	flag.StringVar(&o.Binary, "cozy-aio", "bin/cozy-aio", "the cozy-aio binary")
	flag.IntVar(&o.Tenants, "tenants", envInt("DEMO_TENANTS", 20), "tenants (DEMO_TENANTS)")
	flag.IntVar(&o.Releases, "releases", envInt("DEMO_RELEASES", 5), "HelmReleases per tenant on average (DEMO_RELEASES)")
	flag.BoolVar(&o.Break, "break", os.Getenv("DEMO_BREAK") == "1", "give one tenant a broken chart (DEMO_BREAK=1)")
	flag.BoolVar(&o.Scale, "scale", os.Getenv("DEMO_SCALE") == "1", "the scale benchmark's shape (DEMO_SCALE=1)")
	flag.StringVar(&o.ChartSource, "chart-source", os.Getenv("DEMO_CHART_SOURCE"), `in the scale shape, "helmrepository" takes the charts from spec.chart and an HTTP HelmRepository instead of chartRef (DEMO_CHART_SOURCE)`)
	flag.BoolVar(&o.KeepLeader, "keep-leader", os.Getenv("DEMO_KILL") == "0", "with several replicas, kill no one (DEMO_KILL=0)")
	flag.IntVar(&o.Replicas, "replicas", envInt("DEMO_REPLICAS", 1), "cozy-aio replicas, as on that many control-plane nodes; with more than one the leader is killed once a third of the tenant releases are Ready (DEMO_REPLICAS)")
	flag.IntVar(&o.Nodes, "nodes", 3, "simulated nodes")
	flag.IntVar(&o.Clusters, "clusters", envInt("DEMO_CLUSTERS", 0), "tenant clusters, each its own API server with ten addon HelmReleases deployed through spec.kubeConfig (DEMO_CLUSTERS)")
	down := flag.String("cluster-down", os.Getenv("DEMO_CLUSTER_DOWN"), `with tenant clusters: "midway" (the demo shape's default) stops the last one's API server once its first release is Ready, "start" before cozy-aio starts, "none" (the scale shape's default) keeps all up (DEMO_CLUSTER_DOWN)`)
	flag.BoolVar(&o.Audit, "audit", false, "write the API server's audit log to the logs directory")
	flag.IntVar(&o.Shards, "shards", 4, "Helm shards")
	flag.IntVar(&o.ShardWorkers, "shard-workers", 4, "Helm workers per shard")
	flag.DurationVar(&o.Timeout, "timeout", 15*time.Minute, "how long to wait for every unit to settle")
	flag.StringVar(&o.WorkDir, "work-dir", "", "where the bootstrap directory, data and logs go (default: a temporary directory)")
	flag.BoolVar(&o.Restart, "restart", os.Getenv("DEMO_RESTART") == "1", "scale shape: restart cozy-aio once every unit is Ready, with its data directory and then an empty one (DEMO_RESTART=1)")
	flag.DurationVar(&o.Idle, "idle", envDuration("DEMO_IDLE"), "scale shape: measure cozy-aio's idle cost for this long at the end (DEMO_IDLE)")
	flag.DurationVar(&o.Profile, "profile", envDuration("DEMO_PROFILE"), "scale shape: a CPU profile of cozy-aio of this length from its start, in logs/cozy-aio.cpu.pprof (DEMO_PROFILE)")
	flag.BoolVar(&o.EngineDefaults, "engine-defaults", os.Getenv("DEMO_ENGINE_DEFAULTS") == "1", "run cozy-aio without --shards and --shard-workers (DEMO_ENGINE_DEFAULTS=1)")
	flag.BoolVar(&o.PageOff, "page-off", os.Getenv("DEMO_PAGE") == "0", "run cozy-aio without its status page (DEMO_PAGE=0)")
	flag.IntVar(&o.PageBrowsers, "page-browsers", envInt("DEMO_PAGE_BROWSERS", 0), "headless Chromium browsers kept on the status page through the run; measures their first view and how soon a status write shows (DEMO_PAGE_BROWSERS)")
	comparePage := flag.Bool("compare-page", os.Getenv("DEMO_COMPARE_PAGE") == "1", "scale shape: four runs, page off, page on with two browsers, on, off (DEMO_COMPARE_PAGE=1)")
	compare := flag.Bool("compare-defaults", os.Getenv("DEMO_COMPARE_DEFAULTS") == "1", "two runs: cozy-aio's defaults, then -shards and -shard-workers (DEMO_COMPARE_DEFAULTS=1)")
	compareRemoteRuns := flag.Bool("compare-remote", os.Getenv("DEMO_COMPARE_REMOTE") == "1", "scale shape: four runs, local, remote, remote, local: each tenant's releases in the management cluster, or on a tenant cluster of its own (DEMO_COMPARE_REMOTE=1)")
	compareDown := flag.Bool("compare-down", os.Getenv("DEMO_COMPARE_DOWN") == "1", "scale shape: four runs with a tenant cluster per tenant, all up, one down, one down, all up (DEMO_COMPARE_DOWN=1)")
	compareFluxRuns := flag.Bool("compare-flux", os.Getenv("DEMO_COMPARE_FLUX") == "1", "scale shape: four runs, cozy-aio, Flux, Flux, cozy-aio, each tenant's releases on a tenant cluster of its own; needs -flux-dir (DEMO_COMPARE_FLUX=1)")
	fluxDir := flag.String("flux-dir", os.Getenv("DEMO_FLUX_DIR"), "a directory with Flux's source-controller and helm-controller binaries, built from their module source: the scale shape runs them in place of cozy-aio (DEMO_FLUX_DIR)")
	curve := flag.String("curve", os.Getenv("DEMO_CURVE"), "scale shape: sizes in releases, comma-separated; one run each (DEMO_CURVE)")
	svg := flag.String("curve-svg", envString("DEMO_CURVE_SVG", "docs/benchmarks/scale-curve.svg"), "where -curve writes its chart (DEMO_CURVE_SVG)")
	flag.Parse()
	o.ClusterDown = demo.ClusterDown(*down)
	o.Out = os.Stdout
	// The in-process Git server logs every request through the standard
	// logger; the demo prints its own progress instead.
	log.SetOutput(io.Discard)
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *fluxDir != "" && !*compareFluxRuns {
		o.Flux = fluxControllers(*fluxDir)
	}
	var err error
	switch {
	case *curve != "":
		err = runCurve(ctx, o, *curve, *svg)
	case *compare:
		err = compareDefaults(ctx, o)
	case *comparePage:
		err = comparePageRuns(ctx, o)
	case *compareRemoteRuns:
		err = compareRemote(ctx, o)
	case *compareDown:
		err = compareClusterDown(ctx, o)
	case *compareFluxRuns:
		err = compareFlux(ctx, o, *fluxDir)
	default:
		var res *demo.Result
		res, err = demo.Run(ctx, o)
		if err == nil && len(res.Expected) > 0 {
			fmt.Printf("\ndemo OK: every unit is Ready but the %d addons of the stopped tenant cluster, which are Ready=False naming it as they should; every check held.\n", len(res.Expected))
			return
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo FAILED:\n%v\n", err)
		stop()
		os.Exit(1)
	}
	fmt.Println("\ndemo OK: every unit is Ready and every check held.")
}

func envDuration(name string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(name))
	return d
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
