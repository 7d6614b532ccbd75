package demo

import (
	"testing"
	"time"
)

func TestMachineSpeed(t *testing.T) {
	if s := machineSpeed(50 * time.Millisecond); s <= 0 {
		t.Fatalf("machineSpeed = %v round trips/s, want > 0", s)
	}
}
