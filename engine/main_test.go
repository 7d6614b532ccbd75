package engine_test

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/engine/crds"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(zapLevel()))))
	all, err := crds.All()
	if err != nil {
		panic(err)
	}
	os.Exit(testenv.Run(m, &cp, testenv.ControlPlaneOptions{CRDs: all, Scheme: engine.NewScheme()}))
}

// startEngine runs an engine for one test and stops it at the end.
// loopbackDestinations lets tenant-chosen addresses on loopback through:
// the tests' tenant clusters, notification receivers and foreign artifact
// servers listen there, which the engine refuses by default (the
// destination policy; cozy-aio run --destination-allow=127.0.0.0/8).
var loopbackDestinations = engine.DestinationOptions{
	Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}

func startEngine(t testing.TB, opts engine.Options) *engine.Engine {
	t.Helper()
	e, stop := runEngine(t, opts)
	t.Cleanup(stop)
	return e
}

// runEngine runs an engine until stop is called, for a benchmark that
// runs one per iteration.
func runEngine(t testing.TB, opts engine.Options) (e *engine.Engine, stop func()) {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.ArtifactAddr == "" {
		opts.ArtifactAddr = "127.0.0.1:0"
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	e, err := engine.New(cp.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	return e, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine stopped with %v", err)
		}
	}
}

// waitReady waits until obj's Ready condition has the wanted status, and
// returns the object as last read.
func waitFor(t *testing.T, obj interface {
	client.Object
	conditions.Getter
}, check func() bool, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return check(), nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s: %s never happened; conditions: %+v", obj.GetObjectKind().GroupVersionKind().Kind,
			obj.GetNamespace(), obj.GetName(), what, obj.GetConditions())
	}
}

func readyIs(obj conditions.Getter, status bool) func() bool {
	return func() bool {
		c := conditions.Get(obj, meta.ReadyCondition)
		if c == nil {
			return false
		}
		return (c.Status == "True") == status
	}
}

func zapLevel() int8 {
	if os.Getenv("COZY_TEST_LOG") != "" {
		return -1
	}
	return 2 // errors only
}
