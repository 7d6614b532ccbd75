package bootstrap_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &cp, testenv.ControlPlaneOptions{Scheme: engine.NewScheme()}))
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func init() {
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(logLevel()))))
}

func logLevel() int8 {
	if os.Getenv("COZY_TEST_LOG") != "" {
		return -1
	}
	return 2
}
