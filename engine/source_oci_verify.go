package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/cozy-aio/source/oci"
	"github.com/cozystack/cozy-aio/source/verify"
)

// ociVerification is the spec.verify of an OCIRepository or a HelmChart
// made ready to use: cosign with the public keys of its Secret, and the
// fingerprint source-controller records for them.
type ociVerification struct {
	provider    string
	keys        [][]byte
	fingerprint string
	// revision is the revision verified, once one is.
	revision string
}

// ociVerificationFor reads the keys v names (nil v: nothing to verify).
// Keyless cosign and Notation are refused before, by the unsupported
// field checks.
func (e *Engine) ociVerificationFor(ctx context.Context, referrer, namespace string, v *sourcev1.OCIRepositoryVerification) (*ociVerification, error) {
	if v == nil {
		return nil, nil
	}
	ov := &ociVerification{provider: v.Provider}
	if ov.provider == "" {
		ov.provider = "cosign" // the CRD's default
	}
	var s *corev1.Secret
	if v.SecretRef != nil {
		var err error
		if s, err = e.secret(ctx, referrer, namespace, v.SecretRef.Name); err != nil {
			return nil, ov.refused(err)
		}
		for k, b := range s.Data {
			if strings.HasSuffix(k, ".pub") {
				ov.keys = append(ov.keys, b)
			}
		}
	}
	ov.fingerprint = verificationMaterialFingerprint(ov.provider, s)
	return ov, nil
}

// verificationMaterialFingerprint is the digest of the provider and the
// public keys, whatever the Secret and its keys are named:
// source-controller's status.sourceVerificationFingerprint for cosign.
func verificationMaterialFingerprint(provider string, s *corev1.Secret) string {
	var b strings.Builder
	b.WriteString("provider:" + provider + "\x00")
	if s != nil {
		var keys []string
		for k, v := range s.Data {
			if strings.HasSuffix(k, ".pub") {
				keys = append(keys, string(v))
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			b.WriteString("pub:" + k + "\x00")
		}
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
		if err := verify.Cosign(ctx, ref, ov.keys, reg); err != nil {
			return ov.refused(err)
		}
		return nil
	}
}

// record writes a successful verification of revision into obj's
// status: SourceVerified and the fingerprint (set through fingerprint).
func (ov *ociVerification) record(obj conditions.Setter, revision string, fingerprint *string) {
	conditions.MarkTrue(obj, sourcev1.SourceVerifiedCondition, meta.SucceededReason, "verified signature of revision %s", revision)
	*fingerprint = ov.fingerprint
}

// verifyChart checks the cosign signature of the OCI chart chartURL at
// digest with the keys v names, as source-controller checks a HelmChart's
// at every reconcile, and marks SourceVerified=False on obj when it fails.
func (e *Engine) verifyChart(ctx context.Context, obj *sourcev1.HelmChart, self nodeRef, v *sourcev1.HelmChartVerification,
	chartURL, digest string, reg oci.Registry) (outcome, bool) {
	ov, err := e.ociVerificationFor(ctx, self.String(), obj.Namespace, &sourcev1.OCIRepositoryVerification{Provider: v.Provider, SecretRef: v.SecretRef})
	if err == nil && len(ov.keys) == 0 {
		err = ov.refused(fmt.Errorf("no public keys found in secret '%s/%s'", obj.Namespace, v.SecretRef.Name))
	}
	if err != nil {
		out, _ := verificationRefused(obj, fmt.Errorf("%s: %w", self, err))
		return out, false
	}
	ref := strings.TrimPrefix(chartURL, "oci://") + "@" + digest
	if err := verify.Cosign(ctx, ref, ov.keys, reg); err != nil {
		err = fmt.Errorf("chart verification error: %w", err)
		conditions.MarkFalse(obj, sourcev1.SourceVerifiedCondition, sourcev1.VerificationError, "%s", err)
		return failed("ChartVerificationError", fmt.Errorf("%s: %w", self, err)), false
	}
	return outcome{}, true
}
