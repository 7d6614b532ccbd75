package main

import (
	"io"
	"os"
	"testing"
)

// --gc-percent sets the GC target; without it $GOGC, which the runtime has
// read already, stays; with neither the flag's default applies.
func TestGCPercentFlag(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		env      map[string]string
		want     int
		wantSets bool
	}{
		{name: "default", want: defaultGCPercent, wantSets: true},
		{name: "flag", args: []string{"--gc-percent=40"}, want: 40, wantSets: true},
		{name: "GOGC kept", env: map[string]string{"GOGC": "200"}, wantSets: false},
		{name: "flag over GOGC", args: []string{"--gc-percent=40"}, env: map[string]string{"GOGC": "200"}, want: 40, wantSets: true},
		{name: "COZY_AIO_GC_PERCENT over GOGC", env: map[string]string{"GOGC": "200", "COZY_AIO_GC_PERCENT": "30"}, want: 30, wantSets: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOGC", "")
			t.Setenv("COZY_AIO_GC_PERCENT", "")
			unsetEnv(t, "GOGC", "COZY_AIO_GC_PERCENT")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			f, err := parseRun(c.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			got, sets := f.gcPercentToSet()
			if sets != c.wantSets || (sets && got != c.want) {
				t.Fatalf("GC percent %d (set: %v), want %d (set: %v)", got, sets, c.want, c.wantSets)
			}
		})
	}
	if _, err := parseRun([]string{"--gc-percent=0"}, io.Discard); err == nil {
		t.Fatal("--gc-percent=0 accepted; want an error naming the flag")
	}
}

// unsetEnv removes keys from the environment for the test (t.Setenv first
// records them, so that they come back afterwards).
func unsetEnv(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
}
