// Package sources is the engine's room for Flux's source kinds:
// GitRepository (with includes and verification), OCIRepository (with
// verification), Bucket, HelmRepository and HelmChart, as source-controller
// reconciles them, and the rebuild of an artifact the store lacks
// (Rebuild). It receives what it uses in Deps and imports no other family
// of kinds.
package sources
