// Package kustomization is the engine's room for Flux's Kustomization:
// build with kustomize, substitute, decrypt SOPS, server-side apply in
// stages on the target cluster as the unit's identity, prune the
// inventory, and wait for health on watches. It receives what it uses in
// Deps and imports no other family of kinds.
package kustomization
