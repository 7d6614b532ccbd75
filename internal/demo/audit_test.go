package demo

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLeaderStatusWrites(t *testing.T) {
	log := `{"verb":"patch","userAgent":"cozy-aio/v0.0.0 (linux/amd64) kubernetes/$Format replica/node-1","objectRef":{"resource":"gitrepositories","subresource":"status"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-03T10:00:01.000000Z"}
{"verb":"patch","userAgent":"cozy-aio/v0.0.0 replica/node-2","objectRef":{"resource":"helmreleases","subresource":"status"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-03T10:00:02.000000Z"}
{"verb":"get","userAgent":"cozy-aio/v0.0.0 replica/node-2","objectRef":{"resource":"kustomizations","subresource":"status"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-03T10:00:03.000000Z"}
{"verb":"patch","userAgent":"cozy-aio/v0.0.0 replica/node-2","objectRef":{"resource":"kustomizations","subresource":"status"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-03T10:00:05.000000Z"}
{"verb":"patch","userAgent":"cozy-aio/v0.0.0 replica/node-1","objectRef":{"resource":"ocirepositories","subresource":"status"},"responseStatus":{"code":409},"requestReceivedTimestamp":"2026-12-03T10:00:06.000000Z"}
{"verb":"update","userAgent":"cozy-aio/v0.0.0 replica/node-1","objectRef":{"resource":"externalartifacts","subresource":"status"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-03T10:00:04.000000Z"}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	writes, err := leaderStatusWrites(path)
	if err != nil {
		t.Fatal(err)
	}
	// The HelmRelease status, the read and the refused write are not
	// leader status writes; the rest come in the order received.
	var got []string
	for _, w := range writes {
		got = append(got, w.String())
	}
	want := []string{"node-1@2026-12-03T10:00:01Z", "node-1@2026-12-03T10:00:04Z", "node-2@2026-12-03T10:00:05Z"}
	if !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	if terms := writerTerms(writes); !slices.Equal(terms, []string{"node-1", "node-2"}) {
		t.Fatalf("terms = %v", terms)
	}
	// Two replicas taking turns show up as more terms than leader changes.
	interleaved := append(writes, statusWrite{at: writes[2].at.Add(1), replica: "node-1"})
	if terms := writerTerms(interleaved); len(terms) != 3 {
		t.Fatalf("interleaved writers: terms = %v, want 3", terms)
	}
}
