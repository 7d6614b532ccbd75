// Package replicas is the engine's room for running as several replicas:
// the leader Lease, each replica's own Lease, the Leases of the Helm shards
// and their hand-offs, the published shard assignment, the fencing and
// claims of Helm release records, and the mirror that keeps a standby's
// store warm. It receives what it uses in Deps and imports no family of
// kinds.
package replicas
