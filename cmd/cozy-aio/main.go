package main

import (
	"fmt"
	"os"
)

// version is stamped at link time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println(version)
		return
	}
	fmt.Fprintln(os.Stderr, "cozy-aio: only 'version' is available in this build; the engine lands with issue #5")
	os.Exit(2)
}
