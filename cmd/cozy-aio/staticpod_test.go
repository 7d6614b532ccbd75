package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cozystack/cozy-aio/internal/image"
)

// TestStaticPodRunsTheImage checks that the static pod's default image is
// tagged with the binary's own version and runs the path where `make
// image` puts the binary.
func TestStaticPodRunsTheImage(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "v1.2.3"
	var out, errb bytes.Buffer
	if code := run([]string{"static-pod"}, &out, &errb); code != 0 {
		t.Fatalf("static-pod: %s", errb.String())
	}
	for _, want := range []string{"image: ghcr.io/cozystack/cozy-aio:v1.2.3\n", "- " + image.BinaryPath + "\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("static pod lacks %q:\n%s", want, out.String())
		}
	}
}
