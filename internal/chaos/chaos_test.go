package chaos

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// cozyBinary is $COZY_AIO_BINARY (make chaos passes bin/cozy-aio), else
// the binary built for this test.
func cozyBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("COZY_AIO_BINARY"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "cozy-aio")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/cozystack/cozy-aio/cmd/cozy-aio").CombinedOutput()
	if err != nil {
		t.Fatalf("building cozy-aio: %v\n%s", err, out)
	}
	return bin
}

// smallCampaign is the campaign of `make test`: every kind of fault the
// harness has, each a few times, on 20 HelmReleases and 4 Kustomizations.
// CHAOS_* variables size it up (make chaos).
var smallCampaign = Options{
	Seed: 1, Releases: 20, Kustomizations: 4, Broken: true,
	Kills: 5, Wiped: 1, APIRestarts: 1,
	EtcdPauses: 1, EtcdPause: 5 * time.Second,
	SourceOutages: 1, SourceOutage: 5 * time.Second,
	RegistryFaults: 2, RegistryDelay: 2 * time.Second,
	Settle: 3 * time.Minute,
}

// TestCampaign runs the campaign against the real binary, control plane,
// Git server and registry, and fails on any invariant violation, any
// planted credential found in cozy-aio's output, or any crash.
func TestCampaign(t *testing.T) {
	o, err := FromEnv(smallCampaign)
	if err != nil {
		t.Fatal(err)
	}
	o.Binary, o.Out = cozyBinary(t), testWriter{t, new([]byte)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if total := sumFaults(rep.Faults); total < o.Kills+o.APIRestarts {
		t.Fatalf("seed %d: %d faults injected, want at least %d", o.Seed, total, o.Kills+o.APIRestarts)
	}
}

func sumFaults(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// testWriter logs whole lines.
type testWriter struct {
	t   *testing.T
	buf *[]byte
}

func (w testWriter) Write(p []byte) (int, error) {
	*w.buf = append(*w.buf, p...)
	for {
		i := bytes.IndexByte(*w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.t.Log(string((*w.buf)[:i]))
		*w.buf = (*w.buf)[i+1:]
	}
}
