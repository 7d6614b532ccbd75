package sources

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	fluxgit "github.com/fluxcd/pkg/git"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
)

// gitVerification is a GitRepository's spec.verify made ready to use: the
// trusted keys from its Secret and the fingerprint source-controller
// records for them.
type gitVerification struct {
	mode                     sourcev1.GitVerificationMode
	verifyTag, verifyHEAD    bool
	keyRings, authorizedKeys []string
	fingerprint              string
	// message is the SourceVerified message, once verified.
	message string
}

// verificationFailure is a failed signature verification: the reason
// source-controller gives it, on both SourceVerified and Ready.
type verificationFailure struct {
	reason string
	stall  bool
	err    error
}

func (f *verificationFailure) Error() string { return f.err.Error() }
func (f *verificationFailure) Unwrap() error { return f.err }

// gitVerificationFor reads the keys obj's spec.verify names; nil when
// nothing is to be verified, in which case the verification status is
// cleared, as source-controller clears it.
func (r *gitRepositoryReconciler) gitVerificationFor(ctx context.Context, obj *sourcev1.GitRepository) (*gitVerification, error) {
	v := obj.Spec.Verification
	if v == nil || v.Mode == "" {
		obj.Status.SourceVerificationMode, obj.Status.SourceVerificationFingerprint = nil, ""
		conditions.Delete(obj, sourcev1.SourceVerifiedCondition)
		return nil, nil
	}
	s, err := r.s.deps.Secret(ctx, fmt.Sprintf("GitRepository/%s/%s", obj.Namespace, obj.Name), obj.Namespace, v.SecretRef.Name)
	if err != nil {
		return nil, &verificationFailure{reason: "VerificationError", err: fmt.Errorf("public keys secret error: %w", err)}
	}
	gv := &gitVerification{mode: v.GetMode(), verifyTag: v.VerifyTag(), verifyHEAD: v.VerifyHEAD()}
	gv.keyRings, gv.authorizedKeys = verificationKeys(s)
	gv.fingerprint = verificationFingerprint(gv.keyRings, gv.authorizedKeys)
	return gv, nil
}

// verificationKeys sorts a Secret's values into OpenPGP key rings (keys
// ending in .asc, and any other key, as source-controller still accepts)
// and SSH authorized keys (ending in .sshpub).
func verificationKeys(s *corev1.Secret) (keyRings, authorizedKeys []string) {
	for k, v := range s.Data {
		if strings.HasSuffix(k, ".sshpub") {
			authorizedKeys = append(authorizedKeys, string(v))
		} else {
			keyRings = append(keyRings, string(v))
		}
	}
	return keyRings, authorizedKeys
}

// verificationFingerprint is the digest of the trusted keys, whatever the
// Secret and its keys are named: source-controller's
// status.sourceVerificationFingerprint, which tells a rotated key.
func verificationFingerprint(keyRings, authorizedKeys []string) string {
	var b strings.Builder
	for _, set := range []struct {
		prefix string
		keys   []string
	}{{"pgp:", keyRings}, {"ssh:", authorizedKeys}} {
		keys := append([]string(nil), set.keys...)
		sort.Strings(keys)
		for _, k := range keys {
			b.WriteString(set.prefix)
			b.WriteString(k)
			b.WriteByte(0)
		}
	}
	return digest.Canonical.FromString(b.String()).String()
}

// current reports whether the artifact of obj's last revision was verified
// as gv asks: the same keys, and every object the mode names. Only then
// may an unchanged revision skip the fetch.
func (gv *gitVerification) current(obj *sourcev1.GitRepository) bool {
	if gv == nil {
		return true
	}
	observed := obj.Status.SourceVerificationMode
	if observed == nil || obj.Status.SourceVerificationFingerprint != gv.fingerprint ||
		!conditions.IsTrue(obj, sourcev1.SourceVerifiedCondition) {
		return false
	}
	return *observed == sourcev1.ModeGitTagAndHEAD || *observed == gv.mode
}

// verify checks the signatures of the commit and its tag that gv's mode
// names, with source-controller's reasons and messages.
func (gv *gitVerification) verify(c *fluxgit.Commit) error {
	var msg strings.Builder
	msg.WriteString("verified signature of")
	if gv.verifyTag {
		tag := c.ReferencingTag
		if tag == nil {
			return &verificationFailure{reason: "InvalidVerificationMode", stall: true,
				err: errors.New("cannot verify tag object's signature if a tag reference is not specified")}
		}
		if !fluxgit.IsSignedTag(*tag) {
			return &verificationFailure{reason: "InvalidGitObject",
				err: fmt.Errorf("cannot verify signature of tag '%s' since it is not signed", tag)}
		}
		key, err := verifyGitObject(tag, gv.keyRings, gv.authorizedKeys)
		if err != nil {
			return &verificationFailure{reason: "InvalidTagSignature",
				err: fmt.Errorf("signature verification of tag '%s' failed: %w", tag, err)}
		}
		fmt.Fprintf(&msg, "\n\t- tag '%s' with key '%s'", tag, key)
	}
	if gv.verifyHEAD {
		key, err := verifyGitObject(c, gv.keyRings, gv.authorizedKeys)
		if err != nil {
			return &verificationFailure{reason: "InvalidCommitSignature",
				err: fmt.Errorf("signature verification of commit '%s' failed: %w", c.Hash, err)}
		}
		fmt.Fprintf(&msg, "\n\t- commit '%s' with key '%s'", c.Hash, key)
	}
	gv.message = msg.String()
	return nil
}

// gitSigned is a commit or a tag, as fluxcd/pkg/git verifies them.
type gitSigned interface {
	SignatureType() string
	VerifyPGP(keyRings ...string) (string, error)
	VerifySSH(authorizedKeys ...string) (string, error)
}

// verifyGitObject verifies o's signature with the keys of its kind and
// returns the key that made it.
func verifyGitObject(o gitSigned, keyRings, authorizedKeys []string) (string, error) {
	switch t := o.SignatureType(); t {
	case "openpgp":
		if len(keyRings) == 0 {
			return "", errors.New("PGP signature detected but no PGP public keys found in secret (keys with .asc suffix)")
		}
		return o.VerifyPGP(keyRings...)
	case "ssh":
		if len(authorizedKeys) == 0 {
			return "", errors.New("SSH signature detected but no SSH public keys found in secret (keys with .sshpub suffix)")
		}
		return o.VerifySSH(authorizedKeys...)
	default:
		return "", fmt.Errorf("unsupported signature type: %s", t)
	}
}

// record writes a successful verification into obj's status:
// SourceVerified, the mode and the fingerprint. Nothing when gv verified
// nothing (no verification asked, or the fetch was skipped).
func (gv *gitVerification) record(obj *sourcev1.GitRepository) {
	if gv == nil || gv.message == "" {
		return
	}
	mode := gv.mode
	obj.Status.SourceVerificationMode = &mode
	obj.Status.SourceVerificationFingerprint = gv.fingerprint
	conditions.MarkTrue(obj, sourcev1.SourceVerifiedCondition, meta.SucceededReason, "%s", gv.message)
}

// verificationRefused marks SourceVerified=False when err is a failed
// verification and returns the outcome Ready takes, with the same reason.
func verificationRefused(obj conditions.Setter, err error) (frame.Outcome, bool) {
	var f *verificationFailure
	if !errors.As(err, &f) {
		return frame.Outcome{}, false
	}
	conditions.MarkFalse(obj, sourcev1.SourceVerifiedCondition, f.reason, "%s", f.err)
	if f.stall {
		return frame.Stalled(f.reason, err), true
	}
	return frame.Failed(f.reason, err), true
}
