// Package decrypt decrypts SOPS-encrypted manifests and kustomize sources
// with age keys, as kustomize-controller does for a Kustomization whose
// spec.decryption has provider sops.
//
// A Decryptor holds the age identities of a decryption Secret (its
// entries whose names end in .agekey). Before the kustomize build,
// Decryptor.Sources decrypts in place the encrypted files that
// secretGenerator entries and patches read; after the build,
// Decryptor.Object decrypts each rendered object that carries SOPS
// metadata, and each Secret data value that holds a SOPS document:
//
//	d, err := decrypt.New(secret.Data, decrypt.Options{Secret: "Secret/flux-system/sops-age"})
//	if err != nil {
//		return err // *UnsupportedKeyError for PGP, cloud KMS or Vault entries
//	}
//	if err := d.Sources(workDir, "apps/prod"); err != nil {
//		return err
//	}
//	// ... kustomize build ...
//	changed, err := d.Object(obj)
//
// Only age keys are supported; a document that only PGP, cloud KMS or
// Vault keys can open is an *UnsupportedKeyError naming the key types. A
// document that none of the identities opens is an error that wraps
// ErrNoKeyMatched. Errors never hold a decrypted value or ciphertext, and
// SOPS' own loggers are silenced, so decrypted data reaches neither a log
// nor a status message.
package decrypt
