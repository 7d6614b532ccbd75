package redact_test

import (
	"errors"
	"fmt"

	"github.com/cozystack/cozy-aio/internal/redact"
)

func ExampleString() {
	fmt.Println(redact.String("GET https://flux:s3cret@charts.example.com/index.yaml?token=abc&page=2"))
	fmt.Println(redact.String(`Post "https://hooks.slack.com/services/T0/B0/XYZ": EOF`))
	// Output:
	// GET https://***@charts.example.com/index.yaml?token=***&page=2
	// Post "https://hooks.slack.com/***": EOF
}

func ExampleValues() {
	password := []byte("hunter22")
	fmt.Println(redact.Values("password hunter22 (aHVudGVyMjI= in the Secret) refused", password))
	// Output: password *** (*** in the Secret) refused
}

func ExampleError() {
	errDenied := errors.New("access denied")
	err := redact.Error(fmt.Errorf("git https://user:s3cret@git.example.com/app.git: %w", errDenied))
	fmt.Println(err)
	fmt.Println(errors.Is(err, errDenied))
	// Output:
	// git https://***@git.example.com/app.git: access denied
	// true
}
