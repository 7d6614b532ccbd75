package status

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseSample(t *testing.T) {
	name, labels, v, ok := ParseSample(`cozy_aio_shard_load{shard="3"} 250`)
	if !ok || name != "cozy_aio_shard_load" || labels["shard"] != "3" || v != 250 {
		t.Fatalf("got %q %v %v %v", name, labels, v, ok)
	}
	name, labels, v, ok = ParseSample(`rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 4053`)
	if !ok || name != "rest_client_requests_total" || labels["method"] != "GET" || labels["host"] != "127.0.0.1:6443" || v != 4053 {
		t.Fatalf("got %q %v %v %v", name, labels, v, ok)
	}
	// A sample without labels, as cozy_aio_leader is.
	name, labels, v, ok = ParseSample(`cozy_aio_leader 1`)
	if !ok || name != "cozy_aio_leader" || len(labels) != 0 || v != 1 {
		t.Fatalf("got %q %v %v %v", name, labels, v, ok)
	}
	if _, _, _, ok := ParseSample("# HELP x y"); ok {
		t.Fatal("a comment parsed as a sample")
	}
	if _, _, _, ok := ParseSample("garbage"); ok {
		t.Fatal("a line without a value parsed as a sample")
	}
}

// exposition is a /metrics excerpt as a running cozy-aio serves it.
const exposition = `# HELP cozy_aio_bootstrap_phase The bootstrap phase.
# TYPE cozy_aio_bootstrap_phase gauge
cozy_aio_bootstrap_phase{phase="all"} 1
cozy_aio_bootstrap_phase{phase="network"} 0
cozy_aio_leader 1
cozy_aio_shard_load{shard="0"} 3
cozy_aio_shard_load{shard="1"} 0
cozy_aio_shard_owned{shard="0"} 1
cozy_aio_shard_owned{shard="1"} 0
cozy_aio_shard_tenants{shard="0"} 2
cozy_aio_shard_items{shard="0",state="queued"} 4
cozy_aio_shard_items{shard="0",state="waiting"} 1
cozy_aio_shard_items{shard="0",state="running"} 2
cozy_aio_tenant_runs_succeeded_total{tenant="a"} 5
cozy_aio_tenant_runs_succeeded_total{tenant="b"} 2
rest_client_requests_total{code="200",host="h",method="GET"} 10
rest_client_requests_total{code="201",host="h",method="POST"} 3
rest_client_requests_total{code="404",host="h",method="GET"} 2
`

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || len(r.URL.Query()["name[]"]) == 0 {
			t.Errorf("scraped %s: want /metrics with a family filter", r.URL)
		}
		_, _ = w.Write([]byte(exposition))
	}))
	defer srv.Close()
	m, err := Scrape(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Shard{{ID: 0, Load: 3, Tenants: 2, Queued: 4, Waiting: 1, Running: 2, Owned: true}, {ID: 1}}
	if !m.Up || m.Phase != "all" || !m.Leader || m.Runs != 7 || m.Running != 2 ||
		m.Requests["GET"] != 12 || m.Requests["POST"] != 3 || len(m.Shards) != 2 || m.Shards[0] != want[0] || m.Shards[1] != want[1] {
		t.Fatalf("scraped %+v", m)
	}
	if o := m.Owned(); len(o) != 1 || o[0] != 0 {
		t.Fatalf("owned %v, want [0]", o)
	}
	srv.Close()
	if m, err := Scrape(context.Background(), strings.TrimPrefix(srv.URL, "http://")); err == nil || m.Up {
		t.Fatalf("a closed /metrics must fail: %+v", m)
	}
}

func TestWriteText(t *testing.T) {
	s := &Summary{
		Phase: "all", Leader: true,
		Kinds:         CountUnits([]Unit{{Kind: "HelmRelease", Ready: true}, {Kind: "HelmRelease", Namespace: "t1", Name: "redis", Reason: "InstallFailed", Message: "install failed:\n  timed out"}}),
		NotReady:      []Unit{{Kind: "HelmRelease", Namespace: "t1", Name: "redis", Reason: "InstallFailed", Message: "install failed:\n  timed out"}},
		NotReadyTotal: 3,
		Shards:        []Shard{{ID: 0, Load: 2, Tenants: 1, Queued: 1, Owned: true}},
	}
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"phase: all   leader: true",
		"ready: HelmRelease 1/2\n",
		"SHARD  OWNED  LOAD  TENANTS  QUEUED  WAITING  RUNNING\n0      true   2     1        1       0        0\n",
		"not ready (3):",
		"HelmRelease  t1         redis  InstallFailed  install failed: timed out\n",
		"... and 2 more",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "GitRepository") {
		t.Errorf("kinds without units are left out:\n%s", b.String())
	}
}
