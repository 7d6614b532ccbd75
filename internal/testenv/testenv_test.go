package testenv_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &cp, testenv.ControlPlaneOptions{}))
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestMissingBinariesFailFast(t *testing.T) {
	t.Setenv("COZY_TESTBIN_DIR", t.TempDir())
	start := time.Now()
	_, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{})
	if !errors.Is(err, testenv.ErrBinariesMissing) {
		t.Fatalf("want ErrBinariesMissing, got %v", err)
	}
	if !strings.Contains(err.Error(), "kube-apiserver") || !strings.Contains(err.Error(), "hack/testbin.sh") {
		t.Fatalf("error should name the missing binary and the build script: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("missing binaries must fail fast, took %s", time.Since(start))
	}
}

func TestControlPlaneThatCannotStartFails(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		script := "#!/bin/sh\necho \"" + name + ": simulated failure\" >&2\nexit 1\n"
		if err := os.WriteFile(dir+"/"+name, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("COZY_TESTBIN_DIR", dir)
	_, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{StartTimeout: 5 * time.Second})
	if err == nil {
		t.Fatal("a control plane whose binaries exit must not start")
	}
	if !strings.Contains(err.Error(), "starting the test control plane from "+dir) {
		t.Fatalf("error should say what failed and where: %v", err)
	}
}
