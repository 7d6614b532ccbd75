// Package health decides whether Kubernetes objects are ready. It computes
// status with kstatus, extends it with CEL expressions in the shape of Flux's
// healthCheckExprs, and waits for readiness with watches rather than a
// polling loop per object, reporting for each object what is not ready and
// why. It never writes objects.
package health
