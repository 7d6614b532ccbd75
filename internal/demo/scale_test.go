package demo_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/internal/demo"
)

// TestScaleRestart is `make bench-scale` made smaller (3 tenants × 2
// releases) with its restarts and an idle window: the request breakdown
// from the audit log shows the three ConfigMap applies of each release,
// and each restart confirms every release without a new revision or a
// ConfigMap write.
func TestScaleRestart(t *testing.T) {
	bin := demo.BuildCozy(t)
	var out bytes.Buffer
	work := t.TempDir()
	res, err := demo.Run(context.Background(), demo.Options{
		Tenants: 3, Releases: 2, Scale: true, Restart: true, Idle: 3 * time.Second,
		Binary: bin, WorkDir: work, Out: &out, Timeout: 5 * time.Minute, Every: 500 * time.Millisecond,
	})
	t.Log("\n" + out.String())
	if err != nil {
		logTail(t, filepath.Join(work, "logs", "cozy-aio.log"), 300)
		t.Fatalf("bench-scale failed: %v", err)
	}
	const releases = 3 * 2
	if got := res.Breakdown.Writes("configmaps"); got < 3*releases {
		t.Errorf("%d ConfigMap writes in the audit log, want at least %d (three applies per release): %v", got, 3*releases, res.Breakdown)
	}
	if res.Breakdown.Total() < releases {
		t.Errorf("breakdown %v: want at least one request per release", res.Breakdown)
	}
	if len(res.Restarts) != 2 {
		t.Fatalf("restarts %+v: want two (data kept, data emptied)", res.Restarts)
	}
	for _, r := range res.Restarts {
		if r.Confirmed <= 0 || r.Runs < releases {
			t.Errorf("restart %s: confirmed after %s with %d Helm runs, want every one of %d releases confirmed", r.Name, r.Confirmed, r.Runs, releases)
		}
		if r.Revisions != 0 || r.Requests.Writes("configmaps") != 0 {
			t.Errorf("restart %s: %d new revisions and %d ConfigMap writes, want none", r.Name, r.Revisions, r.Requests.Writes("configmaps"))
		}
		if r.Requests.Total() == 0 {
			t.Errorf("restart %s: no request counted from the audit log (a restart lists its kinds at least)", r.Name)
		}
	}
	if res.Idle == nil || res.Idle.Duration < 3*time.Second {
		t.Fatalf("idle %+v: want a 3s window measured", res.Idle)
	}
	for _, want := range []string{"by verb and resource", "restart with every unit Ready, same data directory", "empty data directory", "idle for"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
	noProcessLeft(t, work)
}

// logTail logs the last n lines of a cozy-aio log (the last process's, after
// restarts), so that a failure in CI can be read after its work directory
// is gone.
func logTail(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("no cozy-aio log to show: %v", err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	t.Logf("the last %d lines of %s:\n%s", len(lines), path, strings.Join(lines, "\n"))
}
