// Command fakeaisched stands in for aisched in the image builder's tests: a
// tiny static binary that prints its link-time version on `version`.
package main

import "os"

// version is set at link time: -ldflags "-X main.version=v9.9.9".
var version = "dev"

func main() {
	if len(os.Args) == 2 && os.Args[1] == "version" {
		os.Stdout.WriteString("fakeaisched " + version + " (test build)\n")
		return
	}
	os.Stderr.WriteString("usage: fakeaisched version\n")
	os.Exit(2)
}
