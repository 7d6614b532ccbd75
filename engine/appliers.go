package engine

import "github.com/cozystack/cozy-aio/engine/internal/targets"

// serviceAccount returns the account a unit's objects are applied as: the
// one it names, else in restricted mode the default account, else none
// (the engine's own identity).
func (e *Engine) serviceAccount(name string) string {
	if name == "" && e.opts.Restricted {
		return e.opts.DefaultServiceAccount
	}
	return name
}

// kustomizeManagers are the field managers of Kustomizations' objects.
func (e *Engine) kustomizeManagers() targets.FieldManagers {
	m := targets.FieldManagers{Name: e.opts.KustomizeFieldManager}
	if e.opts.FieldManager != m.Name {
		m.HandOver = []string{e.opts.FieldManager}
	}
	return m
}
