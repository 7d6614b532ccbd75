package apply

import (
	"reflect"
	"testing"
)

func TestInventoryStale(t *testing.T) {
	cm := func(name string) ObjectRef {
		return ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "a", Name: name}
	}
	deployV1 := ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "a", Name: "web"}
	deployV2 := deployV1
	deployV2.Version = "v2"
	tests := []struct {
		name       string
		prev, next []ObjectRef
		want       []ObjectRef
	}{
		{"nothing left", []ObjectRef{cm("x")}, []ObjectRef{cm("x")}, nil},
		{"one removed", []ObjectRef{cm("x"), cm("y")}, []ObjectRef{cm("y")}, []ObjectRef{cm("x")}},
		{"version change is not stale", []ObjectRef{deployV1}, []ObjectRef{deployV2}, nil},
		{"all removed", []ObjectRef{deployV1, cm("x")}, nil, []ObjectRef{cm("x"), deployV1}},
		{"from empty", nil, []ObjectRef{cm("x")}, nil},
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
	a := ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "n", Name: "a"}
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
	r := ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "web"}
	got, err := ParseID(r.ID(), "v1")
	if err != nil || got != r {
		t.Fatalf("ParseID(%q) = %v, %v", r.ID(), got, err)
	}
	if _, err := ParseID("bad", ""); err == nil {
		t.Fatal("want an error")
	}
}
