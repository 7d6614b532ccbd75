// Package apply builds manifests with kustomize, substitutes post-build
// variables, and server-side applies the result with force-conflicts in
// stages (CRDs and Namespaces, then class-like objects, then the rest). It
// keeps an inventory of applied objects, prunes what leaves it, detects and
// corrects drift, and handles immutable-field changes with a per-kind policy.
//
// apply does not decide readiness: that is package health.
package apply
