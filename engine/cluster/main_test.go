package cluster_test

import (
	"os"
	"testing"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

// cp is the management cluster of the GenericConfig tests. It stays nil in
// a fuzzing-only run, where no test needs it.
var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &cp, testenv.ControlPlaneOptions{}))
}
