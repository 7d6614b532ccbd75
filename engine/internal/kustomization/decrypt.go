package kustomization

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/decrypt"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
)

// decryption prepares spec.decryption as kustomize-controller does: the
// files that secretGenerators and patches read are decrypted in the
// extracted copy (tmp) before the build, and the returned hook decrypts
// the rendered objects after it, before substitution.
func (r *Reconciler) decryption(ctx context.Context, obj *kustomizev1.Kustomization, self frame.Ref, tmp, dir string) (func(*unstructured.Unstructured) (bool, error), frame.Outcome, bool) {
	d, out, ok := r.decryptor(ctx, obj, self)
	if !ok {
		return nil, out, false
	}
	rel, err := filepath.Rel(tmp, dir)
	if err != nil {
		return nil, frame.Failed(meta.BuildFailedReason, fmt.Errorf("%s: %w", self, err)).At(string(kustomizev1.ActionDecrypt)), false
	}
	if err := d.Sources(tmp, filepath.ToSlash(rel)); err != nil {
		return nil, decryptFailed(self, err), false
	}
	return objectDecrypter(d, tmp), frame.Outcome{}, true
}

// decryptor reads the age identities of spec.decryption.secretRef. A
// Kustomization without a secretRef gets a decryptor without identities,
// which opens nothing: cozy-aio never decrypts with keys of its own
// environment.
func (r *Reconciler) decryptor(ctx context.Context, obj *kustomizev1.Kustomization, self frame.Ref) (*decrypt.Decryptor, frame.Outcome, bool) {
	var data map[string][]byte
	name := "spec.decryption.secretRef"
	if ref := obj.Spec.Decryption.SecretRef; ref != nil {
		key := client.ObjectKey{Namespace: obj.Namespace, Name: ref.Name}
		name = fmt.Sprintf("Secret/%s/%s", key.Namespace, key.Name)
		var s corev1.Secret
		if err := r.deps.Client.Get(ctx, key, &s); err != nil {
			return nil, frame.Failed(meta.BuildFailedReason, fmt.Errorf("%s: decryption %s: %w", self, name, err)).At(string(kustomizev1.ActionDecrypt)), false
		}
		data = s.Data
	}
	d, err := decrypt.New(data, decrypt.Options{Secret: name})
	if err != nil {
		return nil, frame.Failed(meta.BuildFailedReason, fmt.Errorf("%s: %w", self, err)).At(string(kustomizev1.ActionDecrypt)), false
	}
	return d, frame.Outcome{}, true
}

// decryptFailed is the outcome of a decryption error: UnsupportedField for
// a document only other key types open, a build failure otherwise.
func decryptFailed(self frame.Ref, err error) frame.Outcome {
	if uk := (*decrypt.UnsupportedKeyError)(nil); errors.As(err, &uk) {
		return frame.Stalled(frame.UnsupportedFieldReason, fmt.Errorf("%s: spec.decryption: %w", self, err)).At(string(kustomizev1.ActionDecrypt))
	}
	return frame.Failed(meta.BuildFailedReason, fmt.Errorf("%s: decryption failed: %w", self, err)).At(string(kustomizev1.ActionDecrypt))
}

// objectDecrypter is the build's decrypt hook: it decrypts each rendered
// object and, when an encrypted object does not open, names the file of
// the artifact it came from.
func objectDecrypter(d *decrypt.Decryptor, root string) func(*unstructured.Unstructured) (bool, error) {
	return func(obj *unstructured.Unstructured) (bool, error) {
		mac := decrypt.MAC(obj)
		changed, err := d.Object(obj)
		if err == nil {
			return changed, nil
		}
		if file := fileHolding(root, mac); mac != "" && file != "" {
			err = fmt.Errorf("%s: %w", file, err)
		}
		return false, &objectDecryptError{err: err}
	}
}

// objectDecryptError marks the build errors of the decrypt hook.
type objectDecryptError struct{ err error }

func (e *objectDecryptError) Error() string { return e.err.Error() }
func (e *objectDecryptError) Unwrap() error { return e.err }

func isDecryptError(err error) bool {
	var de *objectDecryptError
	return errors.As(err, &de)
}

// fileHolding returns the path, relative to root, of the manifest that
// holds the SOPS MAC mac (kustomize copies the sops metadata unchanged),
// or "". It runs only on the error path.
func fileHolding(root, mac string) string {
	var found string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return fs.SkipAll
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		ext := strings.ToLower(filepath.Ext(p))
		if !d.Type().IsRegular() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			return nil
		}
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte(mac)) {
			found, _ = filepath.Rel(root, p)
		}
		return nil
	})
	return filepath.ToSlash(found)
}
