package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	kwait "k8s.io/apimachinery/pkg/util/wait"

	"github.com/cozystack/cozy-aio/shard"
)

// Failover is the leader's kill in a run with several replicas and the
// takeover that follows, as the replicas' /metrics reported it.
type Failover struct {
	// Killed is the replica that led and was killed with SIGKILL, At when,
	// ReadyAtKill how many tenant HelmReleases were Ready then, and Shards
	// the Helm shards it owned.
	Killed      string
	At          time.Time
	ReadyAtKill int
	Shards      []int
	// NewLeader is the first other replica that reported cozy_aio_leader 1,
	// at LeaderAt; ShardsAt is when the others owned every one of Shards.
	NewLeader          string
	LeaderAt, ShardsAt time.Time
	// Restarted is when the killed replica was started again, once both
	// had happened.
	Restarted time.Time
}

// LeaderTakeover is the time from the kill to a new leader.
func (f *Failover) LeaderTakeover() time.Duration { return f.LeaderAt.Sub(f.At) }

// ShardTakeover is the time from the kill to the others owning the killed
// replica's shards.
func (f *Failover) ShardTakeover() time.Duration { return f.ShardsAt.Sub(f.At) }

// ReplicaReport is one replica of a run with several.
type ReplicaReport struct {
	ID string
	// Before is what it reported right before the leader was killed, After
	// once the others had taken over, End when the run ended.
	Before, After, End ReplicaState
	// Releases counts the Helm release Secrets whose holder label
	// (helm.cozystack.io/holder) names it at the end: the revisions it
	// wrote last.
	Releases int
	// RunsSucceeded sums cozy_aio_tenant_runs_succeeded_total over its
	// incarnations, as last scraped.
	RunsSucceeded int
	// PeakRSS is the largest of its incarnations', CPU their sum.
	PeakRSS int64
	CPU     time.Duration
}

// short is a replica's state on a progress line: "L 0,2" for the leader
// owning shards 0 and 2.
func (s ReplicaState) short() string {
	switch {
	case !s.Up:
		return "down"
	case s.Leader && len(s.Shards) == 0:
		return "L"
	case s.Leader:
		return "L " + joinInts(s.Shards)
	}
	return joinInts(s.Shards)
}

// scrape reads every running replica's /metrics. The first result is the
// leader's (else the first replica that answered): the phase and the shard
// loads are the same on every replica.
func (h *harness) scrape() (scraped, []ReplicaState) {
	states := make([]ReplicaState, len(h.reps))
	var main scraped
	for i, r := range h.reps {
		if !r.running() {
			continue
		}
		s := r.scrape()
		states[i] = stateOf(s)
		if s.up && (!main.up || s.leader && !main.leader) {
			main = s
		}
	}
	return main, states
}

// failover plays one step of the leader's kill: once a third of the tenant
// HelmReleases (and tenant clusters' addons) are Ready it kills the leader; then it watches the others
// take over, and restarts the killed replica once they have.
func (h *harness) failover(units []Unit) {
	f := h.res.Failover
	switch {
	case f.At.IsZero():
		ready := 0
		for _, u := range units {
			if u.Kind == "HelmRelease" && u.Namespace != SystemNamespace && u.Ready {
				ready++
			}
		}
		// The tenant clusters' addons count too: the kill lands while
		// remote installs run as well as local ones.
		if want := h.tenantReleases() + h.clusterReleases(); want > 0 && ready*3 >= want {
			h.killLeader(ready)
		}
	case f.Restarted.IsZero():
		h.watchTakeover()
	}
}

// tenantReleases is the number of tenant HelmReleases of the run.
func (h *harness) tenantReleases() int {
	n := 0
	for _, t := range h.res.Tenants {
		n += t.Releases
	}
	return n
}

// killLeader kills the replica that reports cozy_aio_leader 1 with
// SIGKILL, as a node that dies; without a leader it waits for the next
// step.
func (h *harness) killLeader(ready int) {
	_, states := h.scrape()
	leader := slices.IndexFunc(states, func(s ReplicaState) bool { return s.Leader })
	if leader < 0 {
		return
	}
	f, victim := h.res.Failover, h.reps[leader]
	for i := range h.reps {
		h.res.Replicas[i].Before = states[i]
	}
	f.Killed, f.ReadyAtKill, f.Shards = victim.id, ready, states[leader].Shards
	f.At = victim.kill()
	h.say("killed the leader %s with SIGKILL (%d of %d tenant HelmReleases Ready); it owned shards %s",
		victim.id, ready, h.tenantReleases()+h.clusterReleases(), joinInts(f.Shards))
}

// watchTakeover notes when another replica leads and when the others own
// the killed replica's shards; once both, it restarts the killed replica.
func (h *harness) watchTakeover() {
	f := h.res.Failover
	_, states := h.scrape()
	now := time.Now()
	owned := map[int]bool{}
	for i, s := range states {
		if h.reps[i].id == f.Killed {
			continue
		}
		if s.Leader && f.LeaderAt.IsZero() {
			f.NewLeader, f.LeaderAt = h.reps[i].id, now
			h.say("%s leads, %.1fs after the kill", f.NewLeader, f.LeaderTakeover().Seconds())
		}
		for _, id := range s.Shards {
			owned[id] = true
		}
	}
	if f.ShardsAt.IsZero() && !slices.ContainsFunc(f.Shards, func(id int) bool { return !owned[id] }) {
		f.ShardsAt = now
		h.say("the others own %s's shards %s, %.1fs after the kill", f.Killed, joinInts(f.Shards), f.ShardTakeover().Seconds())
	}
	if f.LeaderAt.IsZero() || f.ShardsAt.IsZero() {
		return
	}
	for i := range h.reps {
		h.res.Replicas[i].After = states[i]
	}
	victim := h.reps[slices.IndexFunc(h.reps, func(r *replica) bool { return r.id == f.Killed })]
	if err := victim.start(h.exits); err != nil {
		h.say("restarting %s: %v", victim.id, err)
		return
	}
	f.Restarted = time.Now()
	h.say("restarted %s, as kubelet restarts a static pod", victim.id)
}

// usage reads every replica's resources and work when the run settles.
func (h *harness) usage() {
	if h.opts.Flux != nil {
		h.fluxUsage()
		return
	}
	if len(h.reps) == 1 {
		r := h.reps[0]
		h.res.PeakRSS, h.res.CPU = procUsage(r.cmd.Process.Pid)
		m := r.scrape()
		h.res.Requests = m.requests
		h.res.RemoteRequests = h.remoteRequests(m.remote)
		h.res.RemoteBreakdown = h.remoteBreakdown()
		if h.mem != nil {
			m := h.mem.finish()
			h.res.Memory, h.mem = &m, nil
		}
		if h.opts.Scale {
			api, etcd := h.controlPlaneCPU()
			h.res.APIServerCPU, h.res.EtcdCPU = api-h.apiCPU, etcd-h.etcdCPU
			h.res.Breakdown, _, _ = countRequests(filepath.Join(h.logs, "audit.log"), 0, CozyUser)
		}
		return
	}
	h.scrape()
	h.res.PeakRSS, h.res.CPU, h.res.Requests = 0, 0, map[string]int{}
	for i, r := range h.reps {
		rep := &h.res.Replicas[i]
		rep.PeakRSS, rep.CPU = r.usage()
		_, reqs := r.work()
		h.res.PeakRSS, h.res.CPU = max(h.res.PeakRSS, rep.PeakRSS), h.res.CPU+rep.CPU
		for m, n := range reqs {
			h.res.Requests[m] += n
		}
	}
}

// verifyPlacement waits (up to a minute) for every running replica to
// answer and for the shards to be where shard.Spread places them among
// them, records where they are, and checks it.
func (h *harness) verifyPlacement(ctx context.Context) {
	var want map[int]string
	var states []ReplicaState
	placed := func(context.Context) (bool, error) {
		var main scraped
		main, states = h.scrape()
		var ids []int
		for _, s := range main.shards {
			ids = append(ids, s.ID)
		}
		var live []string
		for i, r := range h.reps {
			switch {
			case states[i].Up:
				live = append(live, r.id)
			case r.running():
				return false, nil // restarted, not answering yet
			}
		}
		want = shard.Spread(ids, live)
		return len(ids) > 0 && samePlacement(want, h.reps, states), nil
	}
	err := kwait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, placed)
	var got []string
	for i, r := range h.reps {
		// The restarted replica's runs count once it answers.
		h.res.Replicas[i].End = states[i]
		h.res.Replicas[i].RunsSucceeded, _ = r.work()
		got = append(got, fmt.Sprintf("%s: %s", r.id, states[i]))
	}
	h.check("shards placed", err == nil, "at the end %s (shard.Spread over the running replicas: %v)", strings.Join(got, "; "), want)
}

// samePlacement tells whether each shard is owned by the replica want
// names, and by no other.
func samePlacement(want map[int]string, reps []*replica, states []ReplicaState) bool {
	got := map[int][]string{}
	for i, s := range states {
		for _, id := range s.Shards {
			got[id] = append(got[id], reps[i].id)
		}
	}
	if len(got) != len(want) {
		return false
	}
	for id, owner := range want {
		if len(got[id]) != 1 || got[id][0] != owner {
			return false
		}
	}
	return true
}

// String says how far the kill and the takeover got.
func (f *Failover) String() string {
	switch {
	case f.At.IsZero():
		return "no replica was killed: none reported cozy_aio_leader 1 once a third of the tenant HelmReleases were Ready"
	case f.LeaderAt.IsZero() && f.ShardsAt.IsZero():
		return f.Killed + " killed; no other replica leads, and its shards " + joinInts(f.Shards) + " are not owned by others"
	case f.LeaderAt.IsZero():
		return f.Killed + " killed; its shards moved, but no other replica leads"
	case f.ShardsAt.IsZero():
		return f.Killed + " killed; " + f.NewLeader + " leads, but its shards " + joinInts(f.Shards) + " are not all owned by others"
	}
	return f.Killed + " killed, taken over, not restarted"
}

// replicaSummary prints the replicas' table and the takeover.
func (h *harness) replicaSummary() {
	r, out := h.res, h.opts.Out
	f := r.Failover
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if f == nil {
		// Nobody was killed (KeepLeader): who wrote what, and the cost.
		fmt.Fprintln(tw, "REPLICA\tRELEASES (HOLDER)\tPEAK RSS\tCPU")
		for _, rep := range r.Replicas {
			fmt.Fprintf(tw, "%s\t%d\t%.0f MB\t%.1fs\n", rep.ID, rep.Releases, float64(rep.PeakRSS)/(1<<20), rep.CPU.Seconds())
		}
		tw.Flush()
		return
	}
	fmt.Fprintln(tw, "REPLICA\tBEFORE THE KILL\tAFTER THE TAKEOVER\tAT THE END\tRELEASES (HOLDER)\tHELM RUNS OK\tPEAK RSS\tCPU")
	for _, rep := range r.Replicas {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.0f MB\t%.1fs\n", rep.ID, rep.Before, rep.After, rep.End,
			rep.Releases, rep.RunsSucceeded, float64(rep.PeakRSS)/(1<<20), rep.CPU.Seconds())
	}
	tw.Flush()
	if f.At.IsZero() {
		return
	}
	fmt.Fprintf(out, "\nthe leader %s was killed with SIGKILL at %.1fs, with %d of %d tenant HelmReleases Ready; Leases %s/%s/%s (duration/renew deadline/retry; cozy-aio's defaults are 15s/10s/2s)\n",
		f.Killed, f.At.Sub(r.Started).Seconds(), f.ReadyAtKill, h.tenantReleases()+h.clusterReleases(), demoLeaseDuration, demoRenewDeadline, demoRetryPeriod)
	if !f.LeaderAt.IsZero() {
		fmt.Fprintf(out, "takeover: %s reported cozy_aio_leader 1 %.1fs after the kill", f.NewLeader, f.LeaderTakeover().Seconds())
	}
	if !f.ShardsAt.IsZero() {
		fmt.Fprintf(out, "; %s's shards [%s] were owned by others %.1fs after it", f.Killed, joinInts(f.Shards), f.ShardTakeover().Seconds())
	}
	if !f.Restarted.IsZero() {
		fmt.Fprintf(out, "; %s was restarted then, as kubelet restarts a static pod", f.Killed)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "RELEASES (HOLDER) counts the release Secrets whose helm.cozystack.io/holder names the replica at the end; HELM RUNS OK sums cozy_aio_tenant_runs_succeeded_total over its incarnations, as last scraped")
}
