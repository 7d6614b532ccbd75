package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"helm.sh/helm/v4/pkg/storage/driver"
	kwait "k8s.io/apimachinery/pkg/util/wait"
)

// Options size a campaign. FromEnv reads them from CHAOS_* variables.
type Options struct {
	// Seed makes the campaign reproducible: which units change and when
	// each fault strikes. Printed with every failure.
	Seed uint64
	// Releases and Kustomizations are the units; Broken adds one release
	// broken on purpose.
	Releases, Kustomizations int
	Broken                   bool
	// Kills are SIGKILLs of cozy-aio, restarted at once; Wiped of them
	// first wipe its data directory; KillsPerCheck kills happen between
	// two checks of the invariants.
	Kills, Wiped, KillsPerCheck int
	// APIRestarts are kube-apiserver restarts.
	APIRestarts int
	// EtcdPauses are pauses of etcd, each EtcdPause long.
	EtcdPauses int
	EtcdPause  time.Duration
	// SourceOutages take the Git server and the registry down together
	// for SourceOutage each.
	SourceOutages int
	SourceOutage  time.Duration
	// RegistryFaults alternate a slow registry (RegistryDelay per request)
	// and one answering 500s, each for SourceOutage.
	RegistryFaults int
	RegistryDelay  time.Duration
	// Ops is the number of unit changes before each fault. Default:
	// a tenth of the releases, at least 2.
	Ops int
	// Settle bounds the wait for the invariants after each fault.
	// Default: 5m.
	Settle time.Duration
	// Binary, WorkDir, Shards, Workers: see EnvOptions. Out receives the
	// progress and the report.
	Binary, WorkDir string
	Shards, Workers int
	Out             io.Writer
}

// FromEnv reads CHAOS_SEED, CHAOS_RELEASES, CHAOS_KUSTOMIZATIONS,
// CHAOS_KILLS, CHAOS_WIPED, CHAOS_KILLS_PER_CHECK, CHAOS_API_RESTARTS,
// CHAOS_ETCD_PAUSES, CHAOS_ETCD_PAUSE, CHAOS_SOURCE_OUTAGES,
// CHAOS_SOURCE_OUTAGE, CHAOS_REGISTRY_FAULTS, CHAOS_OPS, CHAOS_SETTLE over
// the values of o.
func FromEnv(o Options) (Options, error) {
	ints := map[string]*int{
		"CHAOS_RELEASES": &o.Releases, "CHAOS_KUSTOMIZATIONS": &o.Kustomizations,
		"CHAOS_KILLS": &o.Kills, "CHAOS_WIPED": &o.Wiped, "CHAOS_KILLS_PER_CHECK": &o.KillsPerCheck,
		"CHAOS_API_RESTARTS": &o.APIRestarts, "CHAOS_ETCD_PAUSES": &o.EtcdPauses,
		"CHAOS_SOURCE_OUTAGES": &o.SourceOutages, "CHAOS_REGISTRY_FAULTS": &o.RegistryFaults, "CHAOS_OPS": &o.Ops,
	}
	for k, p := range ints {
		if v := os.Getenv(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return o, fmt.Errorf("%s=%q: %w", k, v, err)
			}
			*p = n
		}
	}
	durs := map[string]*time.Duration{"CHAOS_ETCD_PAUSE": &o.EtcdPause, "CHAOS_SOURCE_OUTAGE": &o.SourceOutage, "CHAOS_SETTLE": &o.Settle}
	for k, p := range durs {
		if v := os.Getenv(k); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return o, fmt.Errorf("%s=%q: %w", k, v, err)
			}
			*p = d
		}
	}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return o, fmt.Errorf("CHAOS_SEED=%q: %w", v, err)
		}
		o.Seed = n
	}
	return o, nil
}

// Report is what a campaign measured.
type Report struct {
	Seed uint64
	// Faults counts the faults injected by kind.
	Faults map[string]int
	// Converge are the times from the end of each fault (the restart, the
	// resume, the gate reopened) to every invariant holding, by kind.
	Converge map[string][]time.Duration
	// Violations are the invariants that still did not hold when a settle
	// timed out, with the phase.
	Violations []PhaseViolation
	// Leaks are planted credentials found in cozy-aio's output.
	Leaks []Leak
	// Ops counts the unit changes by kind; Rollbacks the rollback
	// revisions Helm wrote; Revisions every release record at the end.
	Ops                  map[string]int
	Rollbacks, Revisions int
	// MidWork counts the faults that struck while the system had not
	// reached what was asked (some invariant or expectation unmet).
	MidWork map[string]int
	// Crashes counts cozy-aio exits the campaign did not cause.
	Crashes  int
	Duration time.Duration
	WorkDir  string
}

// PhaseViolation is a violation and the fault after which it remained.
type PhaseViolation struct {
	Phase string
	Violation
}

// Err is nil when no invariant was violated and nothing leaked.
func (r *Report) Err() error {
	var parts []string
	for _, v := range r.Violations {
		parts = append(parts, v.Phase+": "+v.String())
	}
	for _, l := range r.Leaks {
		parts = append(parts, "leak in "+l.Where+": "+l.Detail)
	}
	if r.Crashes > 0 {
		parts = append(parts, fmt.Sprintf("cozy-aio exited %d times by itself", r.Crashes))
	}
	if len(parts) == 0 {
		return nil
	}
	if len(parts) > 30 {
		parts = append(parts[:30], fmt.Sprintf("and %d more", len(parts)-30))
	}
	return fmt.Errorf("chaos seed %d (CHAOS_SEED=%d reproduces it; logs in %s):\n%s", r.Seed, r.Seed, r.WorkDir, strings.Join(parts, "\n"))
}

// campaign is one run.
type campaign struct {
	o    Options
	env  *Env
	w    *Workload
	rnd  *rand.Rand
	rep  *Report
	recs driver.Driver
	// seen is the highest version of each release of a HelmRelease UID.
	seen map[string]seenRelease
}

type seenRelease struct {
	uid     string
	version int
}

// Run runs a campaign and returns its report; the error is the report's
// (violations, leaks, crashes) or the harness's own.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Settle <= 0 {
		o.Settle = 5 * time.Minute
	}
	if o.Ops <= 0 {
		o.Ops = max(2, o.Releases/10)
	}
	if o.KillsPerCheck <= 0 {
		o.KillsPerCheck = 1
	}
	if o.EtcdPause <= 0 {
		o.EtcdPause = 30 * time.Second
	}
	if o.SourceOutage <= 0 {
		o.SourceOutage = 60 * time.Second
	}
	if o.RegistryDelay <= 0 {
		o.RegistryDelay = 3 * time.Second
	}
	start := time.Now()
	rep := &Report{Seed: o.Seed, Faults: map[string]int{}, Converge: map[string][]time.Duration{}, MidWork: map[string]int{}}
	env, err := StartEnv(ctx, EnvOptions{Binary: o.Binary, WorkDir: o.WorkDir, Shards: o.Shards, Workers: o.Workers, Out: o.Out})
	if err != nil {
		return rep, err
	}
	defer env.Close()
	rep.WorkDir = env.Logs
	rnd := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	c := &campaign{o: o, env: env, rnd: rnd, rep: rep, seen: map[string]seenRelease{},
		w: NewWorkload(env, rnd, o.Releases, o.Kustomizations, o.Broken), recs: driver.NewSecrets(env.Kube.CoreV1().Secrets(""))}
	env.Say("chaos seed %d: %d HelmReleases, %d Kustomizations; %d kills (%d wiped), %d kube-apiserver restarts, %d etcd pauses of %s, %d Git+registry outages of %s, %d registry faults",
		o.Seed, o.Releases, o.Kustomizations, o.Kills, o.Wiped, o.APIRestarts, o.EtcdPauses, o.EtcdPause, o.SourceOutages, o.SourceOutage, o.RegistryFaults)
	if err := c.w.Create(ctx); err != nil {
		return rep, err
	}
	begin := time.Now()
	c.settle(ctx, "initial install", begin)
	if err := c.run(ctx); err != nil {
		return rep, err
	}
	if err := c.w.Settle(ctx); err != nil {
		return rep, err
	}
	snap := c.settle(ctx, "final", time.Now())
	leaks, err := ScanLeaks(ctx, env.C, env.Cozy.Log(), env.Cozy.HealthAddr(), snap, env.Secrets)
	if err != nil {
		return rep, err
	}
	rep.Leaks = leaks
	rep.Ops = c.w.Ops
	rep.Revisions = len(snap.Releases)
	for _, r := range snap.Releases {
		if isRollback(r) {
			rep.Rollbacks++
		}
	}
	rep.Duration = time.Since(start)
	rep.Print(o.Out)
	return rep, rep.Err()
}

// run plays every fault in a seeded order, each after a batch of unit
// changes, checking the invariants once the system settles after it.
func (c *campaign) run(ctx context.Context) error {
	o := c.o
	var plan []string
	for range o.Kills {
		plan = append(plan, "kill")
	}
	for range o.APIRestarts {
		plan = append(plan, "apiserver")
	}
	for range o.EtcdPauses {
		plan = append(plan, "etcd")
	}
	for range o.SourceOutages {
		plan = append(plan, "sources")
	}
	for i := range o.RegistryFaults {
		plan = append(plan, [...]string{"registry-slow", "registry-500"}[i%2])
	}
	c.rnd.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	// Which kills wipe the data directory.
	wipe := map[int]bool{}
	for _, i := range c.rnd.Perm(max(o.Kills, 1))[:min(o.Wiped, o.Kills)] {
		wipe[i] = true
	}
	kills, sinceCheck := 0, 0
	pushed := false
	for step, f := range plan {
		if err := c.w.Step(ctx, o.Ops); err != nil {
			return fmt.Errorf("seed %d, step %d: %w", o.Seed, step, err)
		}
		if !pushed && step >= len(plan)/2 {
			// Halfway, a new chart version: every release upgrades.
			if err := c.w.PushChart(ctx); err != nil {
				return err
			}
			pushed = true
		}
		// The fault strikes at a random instant of the work just asked.
		time.Sleep(time.Duration(c.rnd.Int64N(int64(1500 * time.Millisecond))))
		kind := f
		if f == "kill" && wipe[kills] {
			kind = "kill+wipe"
		}
		if c.busy(ctx) {
			c.rep.MidWork[kind]++
		}
		var end time.Time
		var err error
		switch f {
		case "kill":
			end, err = c.kill(wipe[kills])
			kills++
			sinceCheck++
			if sinceCheck < o.KillsPerCheck && step+1 < len(plan) && plan[step+1] == "kill" {
				c.rep.Faults[kind]++
				continue
			}
			sinceCheck = 0
		case "apiserver":
			_, err = c.env.RestartAPIServer(ctx)
			end = time.Now()
		case "etcd":
			end, err = c.env.PauseEtcd(ctx, o.EtcdPause)
		case "sources":
			end, err = c.outage(ctx, GateDown, c.env.GitGate, c.env.RegGate)
		case "registry-slow":
			end, err = c.outage(ctx, GateSlow, c.env.RegGate)
		case "registry-500":
			end, err = c.outage(ctx, GateFailing, c.env.RegGate)
		}
		if err != nil {
			return fmt.Errorf("seed %d, step %d (%s): %w", o.Seed, step, f, err)
		}
		c.rep.Faults[kind]++
		c.env.Say("fault %d/%d: %s", step+1, len(plan), kind)
		c.settle(ctx, kind, end)
	}
	return nil
}

// busy tells whether work asked is still in flight: the system has not
// reached it, or some invariant does not hold yet.
func (c *campaign) busy(ctx context.Context) bool {
	s, err := ReadSnapshot(ctx, c.env.C, c.recs, c.w.Namespaces)
	if err != nil {
		return true
	}
	s.Broken, s.Seen = c.w.Broken(), c.seenFor(s)
	return !c.w.expected(s) || len(Check(s)) > 0
}

// kill kills cozy-aio with SIGKILL, wipes its data directory if asked,
// and starts it again at once (as kubelet restarts a static pod).
func (c *campaign) kill(wipe bool) (time.Time, error) {
	if c.env.Cozy.Crashed() {
		c.rep.Crashes++
	}
	if c.env.Cozy.Running() {
		c.env.Cozy.Kill()
	}
	if wipe {
		if err := c.env.Cozy.WipeData(); err != nil {
			return time.Time{}, err
		}
	}
	return time.Now(), c.env.Cozy.Start()
}

// outage sets gates to mode for the campaign's outage length, then opens
// them; it returns when they opened.
func (c *campaign) outage(ctx context.Context, mode GateMode, gates ...*Gate) (time.Time, error) {
	for _, g := range gates {
		if err := g.Set(mode, c.o.RegistryDelay); err != nil {
			return time.Time{}, err
		}
	}
	// Work asked during the outage, so that it must wait for the sources.
	if err := c.w.Step(ctx, c.o.Ops); err != nil {
		return time.Time{}, err
	}
	if mode == GateDown {
		if err := c.w.PushChart(ctx); err != nil {
			return time.Time{}, err
		}
	}
	select {
	case <-time.After(c.o.SourceOutage):
	case <-ctx.Done():
	}
	for _, g := range gates {
		if err := g.Set(GateOpen, 0); err != nil {
			return time.Time{}, err
		}
	}
	return time.Now(), nil
}

// settle waits until every invariant holds, measures how long that took
// from end, and records what still does not hold after the Settle timeout.
func (c *campaign) settle(ctx context.Context, phase string, end time.Time) Snapshot {
	var snap Snapshot
	var last []Violation
	var readErr error
	ok := func(ctx context.Context) (bool, error) {
		if c.env.Cozy.Crashed() {
			c.rep.Crashes++
			c.env.Say("cozy-aio exited by itself (log %s); restarting it", c.env.Cozy.Log())
			_ = c.env.Cozy.Start()
		}
		s, err := ReadSnapshot(ctx, c.env.C, c.recs, c.w.Namespaces)
		if err != nil {
			readErr = err
			return false, nil
		}
		readErr = nil
		s.Broken = c.w.Broken()
		s.Seen = c.seenFor(s)
		snap, last = s, Check(s)
		return len(last) == 0 && c.w.expected(s), nil
	}
	err := kwait.PollUntilContextTimeout(ctx, time.Second, c.o.Settle, true, ok)
	took := time.Since(end)
	c.remember(snap)
	if err == nil {
		c.rep.Converge[phase] = append(c.rep.Converge[phase], took)
		c.env.Say("%s: every invariant holds %.1fs after the fault ended", phase, took.Seconds())
		return snap
	}
	if readErr != nil && snap.HelmReleases == nil {
		last = append(last, Violation{Invariant: "read", Object: "API server", Detail: readErr.Error()})
	}
	if !c.w.expected(snap) {
		last = append(last, Violation{Invariant: "lost", Object: "HelmReleases", Detail: "the HelmReleases are not those the campaign created"})
	}
	for _, v := range last {
		c.rep.Violations = append(c.rep.Violations, PhaseViolation{Phase: phase, Violation: v})
	}
	c.env.Say("%s: %d invariants still violated after %s (seed %d): %s", phase, len(last), c.o.Settle, c.o.Seed, firstN(last, 5))
	return snap
}

// seenFor is the highest version seen earlier of each release whose
// HelmRelease is the same object (same UID) now.
func (c *campaign) seenFor(s Snapshot) map[string]int {
	out := map[string]int{}
	for i := range s.HelmReleases {
		hr := &s.HelmReleases[i]
		if prev, ok := c.seen[releaseKey(hr)]; ok && prev.uid == string(hr.UID) {
			out[releaseKey(hr)] = prev.version
		}
	}
	return out
}

func (c *campaign) remember(s Snapshot) {
	latest := map[string]int{}
	for _, r := range s.Releases {
		key := r.Namespace + "/" + r.Name
		latest[key] = max(latest[key], r.Version)
	}
	for i := range s.HelmReleases {
		hr := &s.HelmReleases[i]
		key := releaseKey(hr)
		if v := latest[key]; v > 0 {
			c.seen[key] = seenRelease{uid: string(hr.UID), version: v}
		}
	}
}

// expected tells whether the system reached what the workload last
// asked: the sources at the last commit and chart version, every unit
// reconciled at its generation, the HelmReleases exactly those wanted
// (none lost, every uninstalled one gone).
func (w *Workload) expected(s Snapshot) bool {
	for _, o := range s.OCIRepositories {
		if o.Status.Artifact == nil || !strings.HasPrefix(o.Status.Artifact.Revision, w.chartVersion+"@") {
			return false
		}
	}
	for _, g := range s.GitRepositories {
		if g.Status.Artifact == nil || !strings.HasSuffix(g.Status.Artifact.Revision, w.lastCommit) {
			return false
		}
	}
	for _, k := range s.Kustomizations {
		if k.Status.ObservedGeneration != k.Generation {
			return false
		}
	}
	have := map[string]bool{}
	for _, hr := range s.HelmReleases {
		if hr.Status.ObservedGeneration != hr.Generation {
			return false
		}
		have[hr.Namespace+"/"+hr.Name] = true
	}
	for k, r := range w.releases {
		if have[k] == r.deleted {
			return false
		}
	}
	return len(have) == len(w.releases)-w.deletedCount()
}

func (w *Workload) deletedCount() int {
	n := 0
	for _, r := range w.releases {
		if r.deleted {
			n++
		}
	}
	return n
}

func firstN(vs []Violation, n int) string {
	var parts []string
	for i, v := range vs {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(vs)-n))
			break
		}
		parts = append(parts, v.String())
	}
	return strings.Join(parts, "; ")
}

// Print writes the report's tables.
func (r *Report) Print(out io.Writer) {
	fmt.Fprintf(out, "\n== chaos campaign, seed %d, %.0fs ==\n\n", r.Seed, r.Duration.Seconds())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FAULT\tINJECTED\tMID-WORK\tCONVERGED\tMEDIAN\tWORST")
	var kinds []string
	for k := range r.Converge {
		kinds = append(kinds, k)
	}
	for k := range r.Faults {
		if _, ok := r.Converge[k]; !ok {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		d := append([]time.Duration(nil), r.Converge[k]...)
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		med, worst := "-", "-"
		if len(d) > 0 {
			med, worst = fmt.Sprintf("%.1fs", d[len(d)/2].Seconds()), fmt.Sprintf("%.1fs", d[len(d)-1].Seconds())
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", k, r.Faults[k], r.MidWork[k], len(d), med, worst)
	}
	tw.Flush()
	var ops []string
	for k, n := range r.Ops {
		ops = append(ops, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(ops)
	fmt.Fprintf(out, "\nunit changes: %s\nrelease records at the end: %d (%d rollbacks)\n", strings.Join(ops, ", "), r.Revisions, r.Rollbacks)
	fmt.Fprintf(out, "invariant violations: %d; credential leaks: %d; cozy-aio crashes: %d\n", len(r.Violations), len(r.Leaks), r.Crashes)
	for _, v := range r.Violations {
		fmt.Fprintf(out, "  %s: %s\n", v.Phase, v.Violation)
	}
	for _, l := range r.Leaks {
		fmt.Fprintf(out, "  leak in %s: %s\n", l.Where, l.Detail)
	}
	fmt.Fprintf(out, "logs: %s\n", r.WorkDir)
}
