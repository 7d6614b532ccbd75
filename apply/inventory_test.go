package apply

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cozystack/cozy-aio/health"
)

func TestInventoryStale(t *testing.T) {
	cm := func(name string) health.ObjectRef {
		return health.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "a", Name: name}
	}
	deployV1 := health.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "a", Name: "web"}
	deployV2 := deployV1
	deployV2.Version = "v2"
	tests := []struct {
		name       string
		prev, next []health.ObjectRef
		want       []health.ObjectRef
	}{
		{"nothing left", []health.ObjectRef{cm("x")}, []health.ObjectRef{cm("x")}, nil},
		{"one removed", []health.ObjectRef{cm("x"), cm("y")}, []health.ObjectRef{cm("y")}, []health.ObjectRef{cm("x")}},
		{"version change is not stale", []health.ObjectRef{deployV1}, []health.ObjectRef{deployV2}, nil},
		{"all removed", []health.ObjectRef{deployV1, cm("x")}, nil, []health.ObjectRef{cm("x"), deployV1}},
		{"from empty", nil, []health.ObjectRef{cm("x")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewInventory(tt.prev...).Stale(NewInventory(tt.next...))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestInventoryDeduplicatesAndContains(t *testing.T) {
	a := health.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "n", Name: "a"}
	b := a
	b.Version = "v2"
	inv := NewInventory(a, b)
	if len(inv.Entries) != 1 || inv.Entries[0].Version != "v2" {
		t.Fatalf("entries = %v", inv.Entries)
	}
	a.Version = ""
	if !inv.Contains(a) {
		t.Fatal("Contains ignores the version")
	}
}

func TestParseID(t *testing.T) {
	r := health.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "web"}
	got, err := health.ParseID(r.ID(), "v1")
	if err != nil || got != r {
		t.Fatalf("health.ParseID(%q) = %v, %v", r.ID(), got, err)
	}
	if _, err := health.ParseID("bad", ""); err == nil {
		t.Fatal("want an error")
	}
}

func TestInventoryJSONIsFluxLayout(t *testing.T) {
	inv := NewInventory(
		health.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "a", Name: "web"},
		health.ObjectRef{Version: "v1", Kind: "Namespace", Name: "a"},
	)
	b, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"entries":[{"id":"_a__Namespace","v":"v1"},{"id":"a_web_apps_Deployment","v":"v1"}]}`
	if string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	var back Inventory
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, inv) {
		t.Fatalf("round trip: got %v, want %v", back, inv)
	}
	if err := json.Unmarshal([]byte(`{"entries":[{"id":"bad","v":"v1"}]}`), &back); err == nil {
		t.Fatal("a malformed entry must be an error")
	}
}
