// Package plan says what a new desired state will do to a cluster before
// it is applied: per object create, update (with a field-level diff),
// delete or unchanged, and the risks of the change as a whole, each with a
// stable code, the object and one sentence of why.
//
// Compute is a pure function, as kstatus' is: it takes the objects the
// current release or inventory holds, the objects the new revision
// renders, and what the caller knows of the live cluster (the cached or
// dry-run objects), and returns the Plan. Reading the cluster, rendering
// and the server-side dry-run are the caller's.
//
// Risks look at the change as a whole: every object of an upgrade may be
// valid on its own while a StatefulSet goes away and another whose pods
// match the same selector appears (DuplicateWorkload), which no per-object
// dry-run shows.
//
// The values of Secrets never appear in a plan: their data is compared,
// and a changed key is shown as changed, without its value.
package plan
