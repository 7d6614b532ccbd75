// Package frame is what every family of kinds shares: the outcome of a
// reconcile as data and the Finisher that writes it (conditions, one status
// patch, an Event, a log line, metrics), the Admission of a unit over the
// dependsOn Graph (gate, cycles, readiness, readyExpr), the core/v1 Event
// broadcaster, the reconcile metrics and their handler, and the small
// helpers the families have in common. It imports no family.
package frame
