// Package health decides whether Kubernetes objects are ready. It never
// writes objects.
//
// Compute is a pure function over one object: kstatus
// (github.com/fluxcd/cli-utils) decides Current, InProgress, Failed or
// Terminating. A Checker adds CEL expressions per apiVersion and kind, in
// the shape of Flux's Kustomization healthCheckExprs (current, inProgress,
// failed; evaluated over the object, so "status.phase == 'Running'" reads
// its status):
//
//	checker, err := health.NewChecker([]health.Expr{{
//		APIVersion: "example.com/v1", Kind: "Database",
//		Current: "status.phase == 'Running'", Failed: "status.phase == 'Crashed'",
//	}})
//	r, err := checker.Compute(obj) // r.Status, r.Message
//
// A Waiter waits for sets of objects; one serves the whole process, and
// each wait names its own Checker. It is event-driven: it watches the
// objects (one watch per resource and namespace, narrowed to one name when
// the object is alone) and recomputes a status only when the API server
// reports a change. Start returns at once with a Handle; the caller is
// notified by Handle.Done or WaitOptions.OnDone, and can Cancel the wait,
// for example when a new revision arrives. Wait is the blocking form. The
// result is a Report with, for every object, its status and the reason it
// is not ready; when the wait ends early the error is a *NotReadyError
// that wraps ErrTimeout, ErrFailed or the context's error.
//
//	waiter, err := health.NewWaiter(restConfig, health.WaiterOptions{}) // once
//	h := waiter.Start(ctx, refs, health.WaitOptions{Timeout: 5 * time.Minute, Checker: checker, OnDone: notify})
//	...
//	h.Cancel()
//
// ObjectRef has the same fields as apply.ObjectRef, so an inventory
// converts with health.ObjectRef(ref).
package health
