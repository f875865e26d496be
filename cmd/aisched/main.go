// Command aisched is the single binary of aisched: the local cluster
// (up), the scheduler and, as they land, the other components.
package main

import (
	"os"

	"github.com/aisched/aisched/cmd/aisched/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:]))
}
