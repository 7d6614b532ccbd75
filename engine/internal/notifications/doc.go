// Package notifications is the engine's room for Flux's notification kinds:
// Providers and Alerts, which receive every Event the engine records
// (through the recorder Setup returns), and Receivers, whose webhooks ask
// for a reconcile. It receives what it uses in Deps and imports no other
// family of kinds.
package notifications
