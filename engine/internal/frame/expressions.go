package frame

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/cel"
	celtypes "github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine/internal/kinds"
	"github.com/cozystack/cozy-aio/health"
)

// specDependsOn returns spec.dependsOn of the kinds whose dependencies may
// carry a readyExpr, and the kind they name.
func specDependsOn(obj client.Object) (string, []meta.DependencyReference) {
	if k, ok := kinds.Of(obj); ok && k.DependsOn != nil {
		return k.Name, k.DependsOn(obj)
	}
	return "", nil
}

// readyExprOf returns the readyExpr obj's spec.dependsOn gives for d, or "".
func readyExprOf(obj client.Object, d Ref) string {
	kind, deps := specDependsOn(obj)
	if kind != d.Kind {
		return ""
	}
	for _, dep := range deps {
		ns := dep.Namespace
		if ns == "" {
			ns = obj.GetNamespace()
		}
		if dep.Name == d.Name && ns == d.Namespace {
			return dep.ReadyExpr
		}
	}
	return ""
}

// compileReadyExpr compiles a dependsOn[].readyExpr as Flux does: a CEL
// expression over self (the dependent) and dep (the dependency) that
// returns a bool.
func CompileReadyExpr(expr string) (*cel.Expression, error) {
	return cel.NewExpression(expr, cel.WithCompile(), cel.WithOutputType(celtypes.BoolType), cel.WithStructVariables("self", "dep"))
}

// checkExpressions compiles every readyExpr of obj's spec.dependsOn and,
// for a HelmRelease, its healthCheckExprs; the error names the field, the
// expression and the position.
func CheckExpressions(obj client.Object) error {
	if hr, ok := obj.(*helmv2.HelmRelease); ok {
		if _, err := HealthChecker(hr.Spec.HealthCheckExprs); err != nil {
			return fmt.Errorf("spec.healthCheckExprs: %w", err)
		}
	}
	_, deps := specDependsOn(obj)
	for i, dep := range deps {
		if dep.ReadyExpr == "" {
			continue
		}
		if _, err := CompileReadyExpr(dep.ReadyExpr); err != nil {
			return fmt.Errorf("spec.dependsOn[%d] (%s).readyExpr: %w", i, dep.Name, err)
		}
	}
	return nil
}

// dependencyReadyFor decides whether d is ready for obj: by the readyExpr
// obj gives for d, which replaces the built-in Ready check as in Flux, or
// else by dependencyReady.
func (a *Admission) dependencyReadyFor(ctx context.Context, obj client.Object, d Ref) (bool, string) {
	expr := readyExprOf(obj, d)
	if expr == "" {
		return a.dependencyReady(ctx, d)
	}
	dep, ok := a.NewObject(d.Kind)
	if !ok {
		return false, "kind not reconciled by this engine"
	}
	if err := a.Reader.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Name}, dep); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return false, "not found"
		}
		return false, err.Error()
	}
	prog, err := CompileReadyExpr(expr)
	if err != nil {
		return false, err.Error()
	}
	selfMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false, err.Error()
	}
	depMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dep)
	if err != nil {
		return false, err.Error()
	}
	ready, err := prog.EvaluateBoolean(ctx, map[string]any{"self": selfMap, "dep": depMap})
	switch {
	case err != nil:
		return false, err.Error()
	case !ready:
		return false, fmt.Sprintf("not ready according to readyExpr '%s'", expr)
	}
	return true, ""
}

// healthChecker compiles healthCheckExprs; nil when there are none.
func HealthChecker(exprs []kustomize.CustomHealthCheck) (*health.Checker, error) {
	if len(exprs) == 0 {
		return nil, nil
	}
	hx := make([]health.Expr, len(exprs))
	for i, x := range exprs {
		hx[i] = health.Expr{APIVersion: x.APIVersion, Kind: x.Kind, Current: x.Current, InProgress: x.InProgress, Failed: x.Failed}
	}
	return health.NewChecker(hx)
}
