package engine_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sharedRooms are the rooms under engine/internal that every family may
// import; every other package there is a family of kinds.
var sharedRooms = []string{"frame", "kinds", "targets", "artifacts"}

// TestRoomWalls: no family of kinds imports another family, a shared room
// imports no family, and no room imports the engine facade
// (docs/architecture.md, "Rooms").
func TestRoomWalls(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const facade = "github.com/cozystack/cozy-aio/engine"
	const prefix = facade + "/internal/"
	room := func(p string) (string, bool) {
		name, ok := strings.CutPrefix(p, prefix)
		if !ok {
			return "", false
		}
		name, _, _ = strings.Cut(name, "/")
		return name, true
	}
	var rooms []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		from, ok := room(fields[0])
		if !ok {
			continue
		}
		rooms = append(rooms, from)
		for _, dep := range fields[1:] {
			if dep == facade {
				t.Errorf("room %s imports the engine facade", from)
			}
			to, ok := room(dep)
			if !ok || to == from || slices.Contains(sharedRooms, to) {
				continue
			}
			if slices.Contains(sharedRooms, from) {
				t.Errorf("shared room %s imports the family %s", from, to)
			} else {
				t.Errorf("family %s imports the family %s", from, to)
			}
		}
	}
	if len(rooms) < 2 {
		t.Fatalf("found rooms %v: the walls were not checked", rooms)
	}
}

// fluxAPIs are the import paths of the Flux APIs whose kinds the engine
// reconciles.
var fluxAPIs = []string{
	"github.com/fluxcd/source-controller/api/v1",
	"github.com/fluxcd/kustomize-controller/api/v1",
	"github.com/fluxcd/helm-controller/api/v2",
	"github.com/fluxcd/source-watcher/api/v2/v1beta1",
}

// TestKindSwitches: outside the kind table (engine/internal/kinds), at most
// three switch statements dispatch over the engine's kinds: a case names a
// Flux API type (a type switch) or one of its *Kind constants.
func TestKindSwitches(t *testing.T) {
	var found []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == filepath.Join("internal", "kinds") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		flux := map[string]bool{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if slices.Contains(fluxAPIs, p) && imp.Name != nil {
				flux[imp.Name.Name] = true
			}
		}
		// namesKind: a case names a Flux API type (in a type switch) or
		// one of its kind constants.
		namesKind := func(e ast.Expr, typeSwitch bool) bool {
			if s, ok := e.(*ast.StarExpr); ok {
				e = s.X
			}
			sel, ok := e.(*ast.SelectorExpr)
			if !ok {
				return false
			}
			if x, ok := sel.X.(*ast.Ident); !ok || !flux[x.Name] {
				return false
			}
			return typeSwitch || strings.HasSuffix(sel.Sel.Name, "Kind")
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			_, typeSwitch := n.(*ast.TypeSwitchStmt)
			switch s := n.(type) {
			case *ast.SwitchStmt:
				body = s.Body
			case *ast.TypeSwitchStmt:
				body = s.Body
			default:
				return true
			}
			for _, c := range body.List {
				if slices.ContainsFunc(c.(*ast.CaseClause).List, func(e ast.Expr) bool { return namesKind(e, typeSwitch) }) {
					found = append(found, fset.Position(n.Pos()).String())
					break
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("switches over the kinds outside the table: %v", found)
	if len(found) > 3 {
		t.Errorf("%d switches over the engine's kinds outside engine/internal/kinds (at most 3): %v", len(found), found)
	}
}
