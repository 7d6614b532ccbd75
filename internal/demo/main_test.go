package demo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The cozy-aio binary is built once for the package's tests: the
// end-to-end scenarios and the fencing test run it.
var cozy struct {
	once     sync.Once
	dir, bin string
	err      error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cozy.dir != "" {
		_ = os.RemoveAll(cozy.dir)
	}
	os.Exit(code)
}

// buildCozy builds the real cozy-aio binary, once.
func buildCozy(t *testing.T) string {
	t.Helper()
	cozy.once.Do(func() {
		if cozy.dir, cozy.err = os.MkdirTemp("", "cozy-aio-bin-"); cozy.err != nil {
			return
		}
		cozy.bin = filepath.Join(cozy.dir, "cozy-aio")
		out, err := exec.Command("go", "build", "-o", cozy.bin, "github.com/cozystack/cozy-aio/cmd/cozy-aio").CombinedOutput()
		if err != nil {
			cozy.err = fmt.Errorf("building cozy-aio: %v\n%s", err, out)
		}
	})
	if cozy.err != nil {
		t.Fatal(cozy.err)
	}
	return cozy.bin
}
