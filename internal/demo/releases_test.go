package demo

import (
	"reflect"
	"testing"
)

func TestCheckRecords(t *testing.T) {
	rec := func(ns, name string, v int, status, holder string) releaseRecord {
		return releaseRecord{Namespace: ns, Name: name, Version: v, Status: status, Holder: holder}
	}
	want := []string{"t1/app-1", "t1/app-2"}
	for _, c := range []struct {
		name          string
		records       []releaseRecord
		once, pending []string
	}{
		{name: "each once, deployed", records: []releaseRecord{
			rec("t1", "app-1", 1, "deployed", "node-1"), rec("t1", "app-2", 1, "deployed", "node-2"),
		}},
		{name: "missing", records: []releaseRecord{rec("t1", "app-1", 1, "deployed", "node-1")},
			once: []string{"t1/app-2 has no revision"}},
		{name: "reinstalled as an upgrade", records: []releaseRecord{
			rec("t1", "app-1", 1, "failed", "node-2"), rec("t1", "app-1", 2, "deployed", "node-2"),
			rec("t1", "app-2", 1, "deployed", "node-2"),
		}, once: []string{`t1/app-1 has 2 revisions (v1 failed by "node-2", v2 deployed by "node-2")`}},
		{name: "left pending by the killed leader", records: []releaseRecord{
			rec("t1", "app-1", 1, "pending-install", "node-1"), rec("t1", "app-2", 1, "deployed", "node-2"),
			rec("other", "x", 3, "pending-upgrade", "node-2"),
		}, once: []string{"t1/app-1 has one revision, v1 pending-install, not v1 deployed"},
			pending: []string{`t1/app-1 v1 pending-install by "node-1"`, `other/x v3 pending-upgrade by "node-2"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			once, pending := checkRecords(c.records, want)
			if !reflect.DeepEqual(once, c.once) || !reflect.DeepEqual(pending, c.pending) {
				t.Fatalf("once %q, pending %q; want %q, %q", once, pending, c.once, c.pending)
			}
		})
	}
}

func TestSamePlacement(t *testing.T) {
	reps := []*replica{{id: "node-1"}, {id: "node-2"}}
	want := map[int]string{0: "node-1", 1: "node-2", 2: "node-2"}
	for _, c := range []struct {
		name   string
		states []ReplicaState
		same   bool
	}{
		{"as spread", []ReplicaState{{Up: true, Shards: []int{0}}, {Up: true, Shards: []int{1, 2}}}, true},
		{"one not yet handed back", []ReplicaState{{Up: true}, {Up: true, Shards: []int{0, 1, 2}}}, false},
		{"owned twice", []ReplicaState{{Up: true, Shards: []int{0, 1}}, {Up: true, Shards: []int{1, 2}}}, false},
		{"one unowned", []ReplicaState{{Up: true, Shards: []int{0}}, {Up: true, Shards: []int{1}}}, false},
	} {
		if got := samePlacement(want, reps, c.states); got != c.same {
			t.Errorf("%s: samePlacement = %v", c.name, got)
		}
	}
}
