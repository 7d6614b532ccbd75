package engine_test

import (
	"os/exec"
	"slices"
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
