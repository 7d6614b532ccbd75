package apply

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/health"
)

// SubstituteAnnotation opts an object out of post-build substitution when
// set to "disabled" (Flux's annotation).
const SubstituteAnnotation = "kustomize.toolkit.fluxcd.io/substitute"

// SubstituteOptions configures Substitute. The zero value substitutes
// nothing but still resolves defaults and escapes.
type SubstituteOptions struct {
	// Vars maps variable names to values. Default: none.
	Vars map[string]string
	// Strict makes a ${var} that has neither a value nor a default an
	// error naming the object and the variable. Default: false, and such a
	// variable becomes the empty string, as in Flux.
	Strict bool
}

// MissingVarError is returned in strict mode when a variable has no value.
type MissingVarError struct {
	Object health.ObjectRef
	Vars   []string
}

func (e *MissingVarError) Error() string {
	return fmt.Sprintf("%s: substitution variable(s) not set (strict mode): %s", e.Object, strings.Join(e.Vars, ", "))
}

// Substitute replaces post-build variables in every object, as Flux's
// spec.postBuild.substitute does:
//
//   - ${var} becomes the value of var;
//   - ${var:=default} becomes the value of var, or default when var has no
//     value (${var:-default} is accepted too);
//   - $${var} is an escape and becomes the literal ${var}.
//
// Substitution works on the object's YAML, so a variable can stand for a
// number or a boolean. Objects annotated with SubstituteAnnotation:
// "disabled" are returned untouched. The input objects are not modified.
func Substitute(objs []*unstructured.Unstructured, opts SubstituteOptions) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		if o.GetAnnotations()[SubstituteAnnotation] == "disabled" {
			out[i] = o.DeepCopy()
			continue
		}
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", health.RefOf(o), err)
		}
		text, missing := expand(string(data), opts.Vars)
		if opts.Strict && len(missing) > 0 {
			return nil, &MissingVarError{Object: health.RefOf(o), Vars: missing}
		}
		js, err := yaml.YAMLToJSON([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("%s: the substituted object is not valid YAML: %w", health.RefOf(o), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("%s: the substituted object is not valid: %w", health.RefOf(o), err)
		}
		out[i] = u
	}
	return out, nil
}

// expand substitutes the variables of s and returns the names that had no
// value and no default, sorted.
func expand(s string, vars map[string]string) (string, []string) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	missing := map[string]bool{}
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		if i > 0 && s[i-1] == '$' { // $${var}: escape, emit ${
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			b.WriteString(s)
			break
		}
		expr := s[i+2 : i+end]
		value, ok := resolve(expr, vars, missing)
		b.WriteString(s[:i])
		if ok {
			b.WriteString(value)
		} else {
			b.WriteString(s[i : i+end+1]) // not a variable: keep it
		}
		s = s[i+end+1:]
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, n)
	}
	sort.Strings(names)
	return b.String(), names
}

// resolve evaluates the inside of ${...}. It returns false when expr is not
// a variable reference.
func resolve(expr string, vars map[string]string, missing map[string]bool) (string, bool) {
	name, def, hasDef := expr, "", false
	if j := strings.IndexByte(expr, ':'); j >= 0 && j+1 < len(expr) && (expr[j+1] == '=' || expr[j+1] == '-') {
		name, def, hasDef = expr[:j], expr[j+2:], true
	}
	if !validVarName(name) {
		return "", false
	}
	if v, ok := vars[name]; ok && v != "" {
		return v, true
	}
	if hasDef {
		return def, true
	}
	if v, ok := vars[name]; ok {
		return v, true
	}
	missing[name] = true
	return "", true
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}
