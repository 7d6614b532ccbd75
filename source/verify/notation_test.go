package verify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cozystack/cozy-aio/internal/signtest"
	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source/oci"
	"github.com/cozystack/cozy-aio/source/verify"
)

// trustPolicy is a Notation trust policy for every repository at level.
func trustPolicy(level string) []byte {
	return []byte(`{"version":"1.0","trustPolicies":[{"name":"all","registryScopes":["*"],` +
		`"signatureVerification":{"level":"` + level + `"},"trustStores":["ca:flux"],"trustedIdentities":["*"]}]}`)
}

// TestNotationVerifiesWithTheTrustPolicy: an artifact signed by a
// certificate of the trusted CA verifies; an unsigned one and one signed
// under another CA do not, unless the policy only audits (then it passes
// unverified, as source-controller lets it).
func TestNotationVerifiesWithTheTrustPolicy(t *testing.T) {
	ctx := context.Background()
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	repo, err := reg.Repository("app")
	if err != nil {
		t.Fatal(err)
	}
	push := func(tag string) string {
		t.Helper()
		desc, err := reg.PushArtifact(ctx, "app", tag, map[string]string{"cm.yaml": "name: " + tag + "\n"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return reg.Host() + "/app@" + desc.Digest.String()
	}
	trusted, other := signtest.NewNotationCA(t, "trusted"), signtest.NewNotationCA(t, "other")
	signed, unsigned, byOther := push("signed"), push("unsigned"), push("other")
	trusted.Sign(t, repo, signed)
	other.Sign(t, repo, byOther)

	r := oci.Registry{PlainHTTP: true}
	certs := [][]byte{trusted.Root}
	if ok, err := verify.Notation(ctx, signed, trustPolicy("strict"), certs, r); !ok || err != nil {
		t.Fatalf("signed under the trusted CA: verified %v, %v", ok, err)
	}
	for what, ref := range map[string]string{"unsigned": unsigned, "signed under another CA": byOther} {
		if ok, err := verify.Notation(ctx, ref, trustPolicy("strict"), certs, r); ok || err == nil {
			t.Errorf("%s: verified %v, %v; want an error", what, ok, err)
		}
	}
	if ok, err := verify.Notation(ctx, byOther, trustPolicy("audit"), certs, r); ok || err != nil {
		t.Errorf("audit level, another CA: verified %v, %v; want unverified and no error", ok, err)
	}
	if _, err := verify.Notation(ctx, signed, []byte("{"), certs, r); err == nil || !strings.Contains(err.Error(), "trustpolicy.json") {
		t.Errorf("a broken trust policy: %v, want an error naming trustpolicy.json", err)
	}
}
