package replicas

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestAssignmentRoundTrip encodes and decodes a published assignment of
// 10,000 tenants, and reports its size, which must stay far below the
// 1 MiB of a ConfigMap.
func TestAssignmentRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	for _, c := range []struct {
		name string
		id   func(i int) string
	}{
		{"tenant-NNNNN", func(i int) string { return fmt.Sprintf("tenant-%05d", i) }},
		// Worst case: random 63-character label values.
		{"random-63", func(int) string {
			b := make([]byte, 63)
			for j := range b {
				b[j] = "abcdefghijklmnopqrstuvwxyz0123456789"[r.IntN(36)]
			}
			return string(b)
		}},
	} {
		tenants := map[string]int{}
		for i := range 10000 {
			tenants[c.id(i)] = r.IntN(64)
		}
		data, binary, err := encodeAssignment(rangeInts(64), tenants)
		if err != nil {
			t.Fatal(err)
		}
		size := len(binary[assignmentTenants]) + len(data[assignmentShards])
		t.Logf("%s: 10,000 tenants on 64 shards publish as %d bytes", c.name, size)
		if binary == nil || size > maxAssignmentBytes {
			t.Fatalf("%s: %d bytes, beyond the bound", c.name, size)
		}
		got, err := decodeAssignment(&corev1.ConfigMap{Data: data, BinaryData: binary})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.shards, rangeInts(64)) || !maps.Equal(got.Tenants, tenants) {
			t.Fatalf("%s: the decoded assignment differs", c.name)
		}
	}
}

// TestAssignmentBadInput: a damaged ConfigMap is an error, never a crash,
// and a tenant ID that cannot be written is refused.
func TestAssignmentBadInput(t *testing.T) {
	for name, cm := range map[string]*corev1.ConfigMap{
		"shard":     {Data: map[string]string{assignmentShards: "0,x"}},
		"negative":  {Data: map[string]string{assignmentShards: "-1"}},
		"duplicate": {Data: map[string]string{assignmentShards: "1,1"}},
		"gzip":      {Data: map[string]string{assignmentShards: "0"}, BinaryData: map[string][]byte{assignmentTenants: []byte("not gzip")}},
	} {
		if _, err := decodeAssignment(cm); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	if _, _, err := encodeAssignment([]int{0}, map[string]int{"a b": 0}); err == nil {
		t.Error("a tenant ID with a space was encoded")
	}
}

func rangeInts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// FuzzDecodeAssignment: whatever the ConfigMap holds, decoding returns an
// error or an assignment that encodes and decodes to itself; never a crash.
func FuzzDecodeAssignment(f *testing.F) {
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	f.Add("0,1,2", gz("0 a b\n2 c\n"))
	f.Add("0", gz("   \n\n0"))
	f.Add("1", gz("x a\n"))
	f.Add("", []byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, shards string, tenants []byte) {
		cm := &corev1.ConfigMap{Data: map[string]string{assignmentShards: shards}, BinaryData: map[string][]byte{assignmentTenants: tenants}}
		p, err := decodeAssignment(cm)
		if err != nil {
			return
		}
		data, binary, err := encodeAssignment(p.shards, p.Tenants)
		if err != nil {
			t.Fatalf("a decoded assignment does not encode: %v", err)
		}
		if binary == nil {
			return // too large to publish
		}
		q, err := decodeAssignment(&corev1.ConfigMap{Data: data, BinaryData: binary})
		if err != nil || !slices.Equal(q.shards, p.shards) || !maps.Equal(q.Tenants, p.Tenants) {
			t.Fatalf("round trip changed the assignment (%v)", err)
		}
	})
}
