package chaos

import (
	"bytes"
	"context"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// controller-runtime's and the Git server's own logs say nothing the
	// campaign's report does not.
	ctrllog.SetLogger(logr.Discard())
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

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

// smallSoak is the soak of `make test`: a few releases through a few
// rounds, sampled every two seconds. CHAOS_SOAK_RELEASES and
// CHAOS_SOAK_ROUNDS size it up (make chaos: 1,000 x 10, every 10 s).
var smallSoak = SoakOptions{Releases: 10, Rounds: 3, Every: 2 * time.Second}

// TestSoak changes every release's values round after round and fails
// when a round does not finish or an invariant does not hold at the end;
// it logs cozy-aio's memory, goroutines and descriptors at each round
// (figures for docs/reliability.md, not assertions).
func TestSoak(t *testing.T) {
	o := smallSoak
	for k, p := range map[string]*int{"CHAOS_SOAK_RELEASES": &o.Releases, "CHAOS_SOAK_ROUNDS": &o.Rounds} {
		if v := os.Getenv(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", k, v, err)
			}
			*p = n
		}
	}
	if os.Getenv("CHAOS_SOAK_RELEASES") != "" {
		o.Every = 10 * time.Second
	}
	o.Binary, o.Out = cozyBinary(t), testWriter{t, new([]byte)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Hour)
	defer cancel()
	rep, err := Soak(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != o.Rounds+1 {
		t.Fatalf("%d rounds done, want %d", len(rep.Rounds), o.Rounds+1)
	}
}
