package bootstrap_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/bootstrap"
)

func TestAPIServerEndpointsFromTheRealEndpointSlice(t *testing.T) {
	ctx := testContext(t)
	var got []string
	var err error
	// The API server writes its own EndpointSlice shortly after start.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		got, err = bootstrap.APIServerEndpoints(ctx, cp.Client)
		if err == nil && len(got) > 0 {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !strings.HasPrefix(got[0], "https://") {
		t.Fatalf("endpoints = %v, want the API server's https URL", got)
	}
}
