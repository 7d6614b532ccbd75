package sources

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/opencontainers/go-digest"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source/oci"
	"github.com/cozystack/cozy-aio/source/verify"
)

// ociVerification is the spec.verify of an OCIRepository or a HelmChart
// made ready to use: cosign with the public keys of its Secret, or
// Notation with its trust policy and certificates, and the fingerprint
// source-controller records for them.
type ociVerification struct {
	provider    string
	keys        [][]byte // cosign: the .pub values
	trustPolicy []byte   // notation: trustpolicy.json
	certs       [][]byte // notation: the .crt and .pem values
	fingerprint string
	// verified is set once an artifact verified (Notation may let one
	// through unverified, as its policy says).
	verified bool
}

// ociVerificationFor reads the material v names (nil v: nothing to
// verify). Keyless cosign is refused before, by the unsupported field
// checks.
func (s *Sources) ociVerificationFor(ctx context.Context, referrer, namespace string, v *sourcev1.OCIRepositoryVerification) (*ociVerification, error) {
	if v == nil {
		return nil, nil
	}
	ov := &ociVerification{provider: v.Provider}
	if ov.provider == "" {
		ov.provider = "cosign" // the CRD's default
	}
	if v.SecretRef == nil {
		return nil, ov.refused(fmt.Errorf("verification secret cannot be empty: '%s'", referrer))
	}
	sec, err := s.deps.Secret(ctx, referrer, namespace, v.SecretRef.Name)
	if err != nil {
		return nil, ov.refused(err)
	}
	for k, b := range sec.Data {
		switch {
		case ov.provider == "notation" && (strings.HasSuffix(k, ".crt") || strings.HasSuffix(k, ".pem")):
			ov.certs = append(ov.certs, b)
		case ov.provider != "notation" && strings.HasSuffix(k, ".pub"):
			ov.keys = append(ov.keys, b)
		}
	}
	if ov.provider == "notation" {
		var ok bool
		if ov.trustPolicy, ok = sec.Data["trustpolicy.json"]; !ok {
			return nil, ov.refused(fmt.Errorf("'trustpolicy.json' not found in secret '%s/%s'", sec.Namespace, sec.Name))
		}
		if len(ov.certs) == 0 {
			return nil, ov.refused(fmt.Errorf("no certificates found in secret '%s/%s'", sec.Namespace, sec.Name))
		}
	}
	ov.fingerprint = ov.fingerprintOf()
	return ov, nil
}

// fingerprintOf is the digest of the provider and its material (the
// trust policy and the certificates, or the keys), whatever the Secret and
// its keys are named: source-controller's
// status.sourceVerificationFingerprint.
func (ov *ociVerification) fingerprintOf() string {
	var b strings.Builder
	b.WriteString("provider:" + ov.provider + "\x00")
	prefix, material := "pub:", ov.keys
	if ov.provider == "notation" {
		b.WriteString("trustpolicy:" + string(ov.trustPolicy) + "\x00")
		prefix, material = "cert:", ov.certs
	}
	sorted := make([]string, 0, len(material))
	for _, m := range material {
		sorted = append(sorted, string(m))
	}
	sort.Strings(sorted)
	for _, m := range sorted {
		b.WriteString(prefix + m + "\x00")
	}
	return digest.Canonical.FromString(b.String()).String()
}

func (ov *ociVerification) refused(err error) error {
	return &verificationFailure{reason: sourcev1.VerificationError,
		err: fmt.Errorf("failed to verify the signature using provider '%s': %w", ov.provider, err)}
}

// current reports whether the stored artifact of obj was verified as ov
// asks: SourceVerified for this generation and the same keys. Only then
// may an unchanged revision skip the fetch.
func (ov *ociVerification) current(obj conditions.Getter, generation int64, fingerprint string) bool {
	if ov == nil {
		return true
	}
	c := conditions.Get(obj, sourcev1.SourceVerifiedCondition)
	return c != nil && c.Status == "True" && c.ObservedGeneration == generation && fingerprint == ov.fingerprint
}

// verifier returns the oci.Options.Verify that checks a manifest with
// ov's keys, reaching the registry as reg says.
func (ov *ociVerification) verifier(reg oci.Registry) func(ctx context.Context, ref string) error {
	return func(ctx context.Context, ref string) error {
		verified, err := ov.check(ctx, ref, reg)
		if err != nil {
			return ov.refused(err)
		}
		ov.verified = verified
		return nil
	}
}

// check verifies ref with ov's provider and material.
func (ov *ociVerification) check(ctx context.Context, ref string, reg oci.Registry) (bool, error) {
	if ov.provider == "notation" {
		return verify.Notation(ctx, ref, ov.trustPolicy, ov.certs, reg)
	}
	return true, verify.Cosign(ctx, ref, ov.keys, reg)
}

// record writes a successful verification of revision into obj's
// status: SourceVerified and the fingerprint (set through fingerprint).
func (ov *ociVerification) record(obj conditions.Setter, revision string, fingerprint *string) {
	conditions.MarkTrue(obj, sourcev1.SourceVerifiedCondition, meta.SucceededReason, "verified signature of revision %s", revision)
	*fingerprint = ov.fingerprint
}

// verifyChart checks the signature of the OCI chart chartURL at digest
// as v says, as source-controller checks a HelmChart's at every
// reconcile, and marks SourceVerified=False on obj when it fails. verified
// is false when a Notation policy let the chart through unverified.
func (s *Sources) verifyChart(ctx context.Context, obj *sourcev1.HelmChart, self frame.Ref, v *sourcev1.HelmChartVerification,
	chartURL, digest string, reg oci.Registry) (verified bool, out frame.Outcome, ok bool) {
	ov, err := s.ociVerificationFor(ctx, self.String(), obj.Namespace, &sourcev1.OCIRepositoryVerification{Provider: v.Provider, SecretRef: v.SecretRef})
	if err == nil && ov.provider != "notation" && len(ov.keys) == 0 {
		err = ov.refused(fmt.Errorf("no public keys found in secret '%s/%s'", obj.Namespace, v.SecretRef.Name))
	}
	if err != nil {
		out, _ := verificationRefused(obj, fmt.Errorf("%s: %w", self, err))
		return false, out, false
	}
	ref := strings.TrimPrefix(chartURL, "oci://") + "@" + digest
	verified, err = ov.check(ctx, ref, reg)
	if err != nil {
		err = fmt.Errorf("chart verification error: %w", err)
		conditions.MarkFalse(obj, sourcev1.SourceVerifiedCondition, sourcev1.VerificationError, "%s", err)
		return false, frame.Failed("ChartVerificationError", fmt.Errorf("%s: %w", self, err)), false
	}
	return verified, frame.Outcome{}, true
}
