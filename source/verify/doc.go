// Package verify checks the signatures of OCI artifacts before they are
// used, as source-controller's spec.verify does, with the libraries it
// uses: cosign (a v3 bundle found as an OCI referrer, else the v2
// signature tag) with public keys.
//
// It is a package of its own so that programs that never verify do not
// link the Sigstore libraries.
package verify
