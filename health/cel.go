package health

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Expr holds CEL expressions that decide the status of one kind, in the
// shape of Flux's Kustomization spec.healthCheckExprs. Each expression is
// evaluated over the object: its top-level fields are variables, so
// "status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')"
// reads the object's status.
type Expr struct {
	// APIVersion and Kind select the objects, for example
	// "example.com/v1" and "Widget". Both are required.
	APIVersion string
	Kind       string
	// Current is true when the object is ready. Required.
	Current string
	// InProgress, when set, is true while the object is still working.
	InProgress string
	// Failed, when set, is true when the object has failed.
	Failed string
}

// Checker computes the status of objects with kstatus, and with CEL
// expressions for the kinds that have them. A nil *Checker uses kstatus
// only. It is safe for concurrent use.
type Checker struct {
	byKind map[string]*compiledExpr
}

type compiledExpr struct {
	current, inProgress, failed cel.Program
}

// NewChecker compiles exprs. An expression that does not parse is an error
// naming its kind and which expression it is.
func NewChecker(exprs []Expr) (*Checker, error) {
	env, err := cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	)
	if err != nil {
		return nil, fmt.Errorf("creating the CEL environment: %w", err)
	}
	c := &Checker{byKind: map[string]*compiledExpr{}}
	for _, e := range exprs {
		id := e.APIVersion + "/" + e.Kind
		if e.APIVersion == "" || e.Kind == "" {
			return nil, fmt.Errorf("health check expression for %q: apiVersion and kind are required", id)
		}
		if e.Current == "" {
			return nil, fmt.Errorf("health check expression for %s: current is required", id)
		}
		var ce compiledExpr
		for _, p := range []struct {
			name string
			src  string
			dst  *cel.Program
		}{{"current", e.Current, &ce.current}, {"inProgress", e.InProgress, &ce.inProgress}, {"failed", e.Failed, &ce.failed}} {
			if p.src == "" {
				continue
			}
			ast, iss := env.Parse(p.src)
			if iss != nil && iss.Err() != nil {
				return nil, fmt.Errorf("health check expression %s for %s: %w", p.name, id, iss.Err())
			}
			prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
			if err != nil {
				return nil, fmt.Errorf("health check expression %s for %s: %w", p.name, id, err)
			}
			*p.dst = prg
		}
		c.byKind[id] = &ce
	}
	return c, nil
}

// Compute returns the status of u: from its CEL expressions when its kind
// has some, else from kstatus. With expressions, an object whose
// status.observedGeneration lags metadata.generation is InProgress; then
// inProgress, failed and current are tried in that order and the first
// that is true decides; when none is, the object is InProgress. An
// expression that cannot be evaluated (for example because the field it
// reads is not there yet) counts as false, and its error is in the message.
func (c *Checker) Compute(u *unstructured.Unstructured) (Result, error) {
	if c == nil || len(c.byKind) == 0 {
		return computeKstatus(u)
	}
	ce, ok := c.byKind[u.GetAPIVersion()+"/"+u.GetKind()]
	if !ok {
		return computeKstatus(u)
	}
	if u.GetDeletionTimestamp() != nil {
		return Result{Status: Terminating, Message: "deletion in progress"}, nil
	}
	og, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if found && og != u.GetGeneration() {
		return Result{Status: InProgress, Message: fmt.Sprintf("observed generation %d, want %d", og, u.GetGeneration())}, nil
	}
	var errs []string
	for _, step := range []struct {
		name   string
		prg    cel.Program
		status Status
	}{{"inProgress", ce.inProgress, InProgress}, {"failed", ce.failed, Failed}, {"current", ce.current, Current}} {
		if step.prg == nil {
			continue
		}
		val, _, err := step.prg.Eval(u.Object)
		if err != nil {
			errs = append(errs, step.name+": "+err.Error())
			continue
		}
		if b, ok := val.(types.Bool); ok && bool(b) {
			return Result{Status: step.status, Message: "health check expression " + step.name + " is true"}, nil
		} else if !ok {
			errs = append(errs, step.name+": not a boolean")
		}
	}
	msg := "health check expression current is not true yet"
	if len(errs) > 0 {
		msg += " (" + strings.Join(errs, "; ") + ")"
	}
	return Result{Status: InProgress, Message: msg}, nil
}
