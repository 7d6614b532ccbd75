// Package helmrelease is the engine's room for Flux's HelmRelease: admission
// (unsupported fields, dependencies, the chart's source, the generated
// HelmChart), the Helm work of each release on its tenant's shard of the
// pool (install, upgrade, test, remediation, drift, uninstall), its status
// history and the progress written while it runs. It receives what it uses
// in Deps and imports no other family of kinds.
package helmrelease
