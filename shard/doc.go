// Package shard assigns tenants to in-process workers with weighted,
// deterministic, bounded-load rendezvous hashing, chooses the shard count
// automatically when asked, and runs a worker pool whose queues are fair
// across tenants. It does not import Helm: the work items are plain funcs.
package shard
