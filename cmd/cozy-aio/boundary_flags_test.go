package main

import (
	"io"
	"strings"
	"testing"
)

// The tenant boundary is closed unless the operator opens it: no token
// minting for objects, loopback and link-local refused, record size bounded.
func TestTenantBoundaryFlags(t *testing.T) {
	f, err := parseRun(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e := f.opts.Engine
	if e.RemoteClusters.AllowWorkloadIdentity || len(e.Destinations.Allow) != 0 || len(e.Destinations.Deny) != 0 ||
		e.MaxReleaseRecordBytes != 64<<20 || e.GeneratorMemoryBytes != 256<<20 {
		t.Fatalf("defaults: workload identity %t, allow %v, deny %v, max record %d",
			e.RemoteClusters.AllowWorkloadIdentity, e.Destinations.Allow, e.Destinations.Deny, e.MaxReleaseRecordBytes)
	}
	f, err = parseRun([]string{"--feature-gates=ObjectLevelWorkloadIdentity=true,StrictPostBuildSubstitutions=true",
		"--destination-allow=127.0.0.0/8,::1", "--destination-deny=10.96.0.0/12"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e = f.opts.Engine
	if !e.RemoteClusters.AllowWorkloadIdentity || !e.StrictSubstitutions || len(e.Destinations.Allow) != 2 ||
		e.Destinations.Deny[0].String() != "10.96.0.0/12" {
		t.Fatalf("set: workload identity %t, strict %t, allow %v, deny %v",
			e.RemoteClusters.AllowWorkloadIdentity, e.StrictSubstitutions, e.Destinations.Allow, e.Destinations.Deny)
	}
	for _, bad := range [][]string{{"--feature-gates=OOMWatch=true"}, {"--feature-gates=ObjectLevelWorkloadIdentity"},
		{"--destination-allow=localhost"}, {"--destination-deny=10.0.0.0/99"}} {
		if _, err := parseRun(bad, io.Discard); err == nil || !strings.Contains(err.Error(), strings.SplitN(bad[0], "=", 2)[0]) {
			t.Errorf("%v: %v, want an error naming the flag", bad, err)
		}
	}
}
