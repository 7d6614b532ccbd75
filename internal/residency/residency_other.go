//go:build !linux

package residency

import "errors"

// ReleaseExecutable is supported on Linux only.
func ReleaseExecutable() (Released, error) {
	return Released{}, errors.New("residency: releasing the executable's pages needs Linux")
}

// ReadExecutableOnDemand is supported on Linux only.
func ReadExecutableOnDemand() (Released, error) {
	return Released{}, errors.New("residency: advising the executable's pages needs Linux")
}
