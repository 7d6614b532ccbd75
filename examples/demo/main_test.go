package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The demo itself runs in internal/demo's end-to-end test; this checks the
// program around it: its knobs and its failure exit.
func TestEnvInt(t *testing.T) {
	t.Setenv("DEMO_TEST_N", "7")
	if got := envInt("DEMO_TEST_N", 20); got != 7 {
		t.Fatalf("envInt = %d, want 7", got)
	}
	for _, v := range []string{"", "0", "-3", "many"} {
		t.Setenv("DEMO_TEST_N", v)
		if got := envInt("DEMO_TEST_N", 20); got != 20 {
			t.Fatalf("envInt(%q) = %d, want the default 20", v, got)
		}
	}
}

func TestMissingBinaryExitsNonZeroNamingIt(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the demo: %v\n%s", err, out)
	}
	missing := filepath.Join(t.TempDir(), "no-cozy-aio")
	cmd := exec.Command(bin, "-cozy-aio", missing)
	cmd.Env = append(os.Environ(), "DEMO_TENANTS=2")
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), missing) || !strings.Contains(string(out), "demo FAILED") {
		t.Fatalf("output does not name the missing binary:\n%s", out)
	}
}
