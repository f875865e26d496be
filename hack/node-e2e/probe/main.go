// Command probe is the one binary of the node end-to-end tests' images:
// "probe pause" is the pod sandbox's pause process (and a container that
// only waits); "probe env FILE" writes the container's environment to FILE
// (a host directory mounted by the test), with whether each file named by
// LD_PRELOAD is present, and waits to be stopped; "probe getenv KEY..."
// prints KEY=value for each KEY set, for a test that execs it in a
// running container.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe pause | probe env FILE | probe getenv KEY...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "getenv":
		for _, key := range os.Args[2:] {
			if v, ok := os.LookupEnv(key); ok {
				fmt.Printf("%s=%s\n", key, v)
			}
		}
		return
	case "pause":
	case "env":
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: probe env FILE")
			os.Exit(2)
		}
		env := os.Environ()
		for _, lib := range strings.Split(os.Getenv("LD_PRELOAD"), ":") {
			if lib == "" {
				continue
			}
			_, err := os.Stat(lib)
			env = append(env, fmt.Sprintf("PROBE_PRELOAD_PRESENT=%s:%v", lib, err == nil))
		}
		slices.Sort(env)
		tmp := os.Args[2] + ".tmp"
		if err := os.WriteFile(tmp, []byte(strings.Join(env, "\n")+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := os.Rename(tmp, os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "probe: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
