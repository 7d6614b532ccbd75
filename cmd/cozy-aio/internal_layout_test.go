package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestShippedInternalPackages: the binary imports exactly the internal
// packages internal/README.md lists as shipped; a test ground (testenv,
// demo, chaos, …) never reaches it.
func TestShippedInternalPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const prefix = "github.com/cozystack/cozy-aio/internal/"
	var got []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, prefix) {
			got = append(got, strings.TrimPrefix(p, prefix))
		}
	}
	slices.Sort(got)
	want := []string{"egress", "redact", "residency", "status", "statuspage"}
	if !slices.Equal(got, want) {
		t.Fatalf("cozy-aio imports internal packages %v, want %v (update internal/README.md when this changes on purpose)", got, want)
	}
}
