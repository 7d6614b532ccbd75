package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// proc is one cozy-aio process of a replica set.
type proc struct {
	id, health string
	cmd        *exec.Cmd
	logs       bytes.Buffer
}

// startReplicaProc runs the binary as replica id with its Leases in ns.
func startReplicaProc(tb testing.TB, bin, kubeconfig, dir, ns, id string, lease [3]time.Duration, extra ...string) *proc {
	tb.Helper()
	p := &proc{id: id, health: loopbackPort(tb)}
	args := append([]string{"run", "--kubeconfig", kubeconfig, "--kubeprism-address", loopbackPort(tb),
		"--data-dir", filepath.Join(dir, id), "--artifact-addr", loopbackPort(tb), "--health-addr", p.health,
		"--replica-id", id, "--leader-elect-namespace", ns, "--shards", "4", "--network-phase=false",
		"--leader-elect-lease-duration", lease[0].String(), "--leader-elect-renew-deadline", lease[1].String(),
		"--leader-elect-retry-period", lease[2].String(), "--log-format", "text"}, extra...)
	if err := os.MkdirAll(filepath.Join(dir, id), 0o700); err != nil {
		tb.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=")
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_, _ = p.cmd.Process.Wait()
	})
	return p
}

func loopbackPort(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

var replicaLine = regexp.MustCompile(`replica (\S+): leader (yes|no), shards \[([0-9,]*)\]`)

// state reads the replica's /readyz: whether it leads and the shards it
// owns; ok is false while it does not answer.
func (p *proc) state() (leader bool, shards []int, ok bool) {
	resp, err := http.Get("http://" + p.health + "/readyz")
	if err != nil {
		return false, nil, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := replicaLine.FindStringSubmatch(string(b))
	if resp.StatusCode != http.StatusOK || m == nil {
		return false, nil, false
	}
	for _, s := range strings.Split(m[3], ",") {
		if n, err := strconv.Atoi(s); err == nil {
			shards = append(shards, n)
		}
	}
	return m[2] == "yes", shards, true
}

// requests is the sum of the replica's client-go API requests so far.
func (p *proc) requests() float64 {
	resp, err := http.Get("http://" + p.health + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "rest_client_requests_total{") {
			if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// waitUntil polls cond every 50 ms and returns the time it took.
func waitUntil(tb testing.TB, what string, limit time.Duration, cond func() bool, procs ...*proc) time.Duration {
	tb.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			var logs strings.Builder
			for _, p := range procs {
				fmt.Fprintf(&logs, "--- %s:\n%s\n", p.id, p.logs.String())
			}
			tb.Fatalf("%s: not within %s\n%s", what, limit, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// owners maps each shard to the replica that owns it, as the replicas say.
func owners(procs ...*proc) (map[int]string, string) {
	out := map[int]string{}
	leader := ""
	for _, p := range procs {
		l, shards, ok := p.state()
		if !ok {
			continue
		}
		if l {
			leader = p.id
		}
		for _, s := range shards {
			out[s] = p.id
		}
	}
	return out, leader
}

// BenchmarkReplicas runs real cozy-aio processes against the test API
// server and measures, per lease setting (duration/renew deadline/retry
// period):
//   - idle-req/min: API requests per minute of one idle replica of two
//     (the Leases' cost; a single instance with --leader-elect=false makes
//     none while idle);
//   - handoff-s: SIGTERM of a replica until the other owns all 4 shards;
//   - join-moved and join-min: shards that changed owner when a third
//     replica joined, against the fewest possible;
//   - leader-takeover-s and shard-takeover-s: SIGKILL of the leader (which
//     owns shards too) until another replica leads, and owns the dead
//     replica's shards.
//
// Run: go test ./cmd/cozy-aio -run '^$' -bench BenchmarkReplicas -benchtime 1x
func BenchmarkReplicas(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "cozy-aio")
	if out, err := exec.Command("go", "build", "-tags", "kustomize_disable_go_plugin_support", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("building: %v\n%s", err, out)
	}
	kubeconfig := writeKubeconfig(b, dir)
	for _, lease := range [][3]time.Duration{
		{15 * time.Second, 10 * time.Second, 2 * time.Second},
		{5 * time.Second, 3 * time.Second, time.Second},
	} {
		b.Run(fmt.Sprintf("lease=%s/%s/%s", lease[0], lease[1], lease[2]), func(b *testing.B) {
			var idle, handoff, leaderTake, shardTake, moved, minimum float64
			for i := range b.N {
				r := replicaRound(b, bin, kubeconfig, filepath.Join(dir, fmt.Sprint(i)), lease)
				idle += r.idlePerMin
				handoff += r.handoff.Seconds()
				leaderTake += r.leaderTakeover.Seconds()
				shardTake += r.shardTakeover.Seconds()
				moved += float64(r.joinMoved)
				minimum += float64(r.joinMin)
			}
			n := float64(b.N)
			b.ReportMetric(idle/n, "idle-req/min")
			b.ReportMetric(handoff/n, "handoff-s")
			b.ReportMetric(moved/n, "join-moved")
			b.ReportMetric(minimum/n, "join-min")
			b.ReportMetric(leaderTake/n, "leader-takeover-s")
			b.ReportMetric(shardTake/n, "shard-takeover-s")
		})
	}
}

type roundResult struct {
	idlePerMin                             float64
	handoff, leaderTakeover, shardTakeover time.Duration
	joinMoved, joinMin                     int
}

func replicaRound(b *testing.B, bin, kubeconfig, dir string, lease [3]time.Duration) roundResult {
	b.Helper()
	var res roundResult
	ns := "replicas-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := createNamespace(ns); err != nil {
		b.Fatal(err)
	}
	x := startReplicaProc(b, bin, kubeconfig, dir, ns, "node-1", lease)
	y := startReplicaProc(b, bin, kubeconfig, dir, ns, "node-2", lease)
	waitUntil(b, "two replicas sharing 4 shards", 2*time.Minute, func() bool {
		o, leader := owners(x, y)
		return leader != "" && len(o) == 4 && slices.Contains(mapValues(o), "node-1") && slices.Contains(mapValues(o), "node-2")
	}, x, y)

	// Idle cost: the API requests of one replica over 20 s, nothing to do.
	before, start := x.requests(), time.Now()
	time.Sleep(20 * time.Second)
	res.idlePerMin = (x.requests() - before) / time.Since(start).Minutes()

	// SIGTERM of the replica that does not lead: its shards move.
	_, leader := owners(x, y)
	stay, leave := x, y
	if leader == "node-2" {
		stay, leave = y, x
	}
	if err := leave.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	res.handoff = waitUntil(b, "the staying replica owning every shard", 2*time.Minute, func() bool {
		o, _ := owners(stay)
		return len(o) == 4
	}, stay, leave)
	_, _ = leave.cmd.Process.Wait()

	// A replica joins: the shards rebalance.
	before4, _ := owners(stay)
	join := startReplicaProc(b, bin, kubeconfig, dir, ns, "node-3", lease)
	waitUntil(b, "the joining replica owning shards", 2*time.Minute, func() bool {
		o, _ := owners(stay, join)
		return len(o) == 4 && slices.Contains(mapValues(o), join.id) && slices.Contains(mapValues(o), stay.id)
	}, stay, join)
	after, _ := owners(stay, join)
	for s, id := range after {
		if before4[s] != id {
			res.joinMoved++
		}
	}
	res.joinMin = 2

	// SIGKILL of the leader: the other leads and takes its shards once the
	// Leases expire.
	dead, live := stay, join
	if _, l := owners(stay, join); l == join.id {
		dead, live = join, stay
	}
	if err := dead.cmd.Process.Kill(); err != nil {
		b.Fatal(err)
	}
	killed := time.Now()
	waitUntil(b, "a new leader", 2*time.Minute, func() bool {
		l, _, _ := live.state()
		return l
	}, live)
	res.leaderTakeover = time.Since(killed)
	waitUntil(b, "the dead replica's shards owned", 2*time.Minute, func() bool {
		o, _ := owners(live)
		return len(o) == 4
	}, live)
	res.shardTakeover = time.Since(killed)
	_ = live.cmd.Process.Signal(syscall.SIGTERM)
	_, _ = live.cmd.Process.Wait()
	return res
}

func mapValues(m map[int]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func createNamespace(name string) error {
	return cp.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}
