package verify

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"

	_ "github.com/notaryproject/notation-core-go/signature/cose" // COSE envelopes
	_ "github.com/notaryproject/notation-core-go/signature/jws"  // JWS envelopes
	"github.com/notaryproject/notation-go"
	"github.com/notaryproject/notation-go/registry"
	"github.com/notaryproject/notation-go/verifier"
	"github.com/notaryproject/notation-go/verifier/trustpolicy"
	"github.com/notaryproject/notation-go/verifier/truststore"

	sourceoci "github.com/cozystack/cozy-aio/source/oci"
)

// Notation verifies the Notation signatures of ref, a digest reference
// ("host/repo@sha256:<hex>"), with the trust policy document trustPolicy
// (trustpolicy.json) and certs (PEM or DER) as every trust store of it,
// as source-controller does. verified is false with a nil error where the
// policy lets an artifact through unverified: a policy that skips
// verification for ref, or one that only logs a failed authenticity
// check (source-controller's "ignored").
func Notation(ctx context.Context, ref string, trustPolicy []byte, certs [][]byte, reg sourceoci.Registry) (verified bool, err error) {
	var doc trustpolicy.Document
	if err := json.Unmarshal(trustPolicy, &doc); err != nil {
		return false, fmt.Errorf("error occurred while parsing trustpolicy.json: %w", err)
	}
	for i, p := range doc.TrustPolicies {
		// A statement that skips verification needs no trust store, as
		// source-controller's CleanTrustPolicy has it.
		if p.SignatureVerification.VerificationLevel == trustpolicy.LevelSkip.Name {
			doc.TrustPolicies[i].TrustStores, doc.TrustPolicies[i].TrustedIdentities = []string{}, []string{}
		}
	}
	v, err := verifier.New(&doc, trustStore(certs), nil)
	if err != nil {
		return false, err
	}
	repoURL, _, _ := strings.Cut(ref, "@")
	repo, err := sourceoci.Repository(repoURL, reg)
	if err != nil {
		return false, err
	}
	_, outcomes, err := notation.Verify(ctx, v, registry.NewRepository(repo),
		notation.VerifyOptions{ArtifactReference: ref, MaxSignatureAttempts: 3})
	if err != nil {
		return false, err
	}
	if len(outcomes) == 0 {
		return false, fmt.Errorf("signature verification failed for all the signatures associated with %s", ref)
	}
	if outcomes[0].VerificationLevel == trustpolicy.LevelSkip {
		return false, nil
	}
	for _, r := range outcomes[0].VerificationResults {
		if r.Error != nil && r.Type == trustpolicy.TypeAuthenticity {
			return false, nil
		}
	}
	return true, nil
}

// trustStore serves the same certificates for every store a trust policy
// names, as source-controller's does.
type trustStore [][]byte

func (s trustStore) GetCertificates(_ context.Context, _ truststore.Type, name string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for _, raw := range s {
		if b, _ := pem.Decode(raw); b != nil {
			raw = b.Bytes
		}
		c, err := x509.ParseCertificates(raw)
		if err != nil {
			return nil, fmt.Errorf("failed to parse certificate '%s': %s", name, err)
		}
		out = append(out, c...)
	}
	return out, nil
}
