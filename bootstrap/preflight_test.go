package bootstrap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/bootstrap"
)

func TestPreflightAsAdminPasses(t *testing.T) {
	r := bootstrap.Preflight(testContext(t), cp.Config, cp.Client, bootstrap.PreflightOptions{DataDir: t.TempDir()})
	if err := r.Err(); err != nil {
		t.Fatalf("admin preflight failed:\n%v", err)
	}
	if len(r) != 4 {
		t.Fatalf("want 4 checks, got %v", r)
	}
}

func TestPreflightNamesEachFailure(t *testing.T) {
	ns := cp.Namespace(t)
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":nobody"}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = bootstrap.Preflight(testContext(t), cfg, c, bootstrap.PreflightOptions{DataDir: notADir}).Err()
	if err == nil {
		t.Fatal("preflight as an unprivileged account must fail")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"can-create-customresourcedefinitions: not allowed", "can-create-namespaces: not allowed", "data-dir-writable"}
	if len(lines) != len(want) {
		t.Fatalf("want one line per failure, got:\n%v", err)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want it to contain %q", i, lines[i], w)
		}
	}
}
