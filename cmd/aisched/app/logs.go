package app

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// setupKlog sends the components' klog output to w at verbosity v.
func setupKlog(w io.Writer, v int) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	// one_output: w gets every line once, not once per severity at or
	// below the line's (an error would be written three times).
	for name, value := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL", "one_output": "true", "v": strconv.Itoa(v)} {
		if err := fs.Set(name, value); err != nil {
			return err
		}
	}
	klog.SetOutput(w)
	// Silence client-go's deprecation warnings on the terminal; they go to the log.
	rest.SetDefaultWarningHandler(rest.NewWarningWriter(w, rest.WarningWriterOptions{}))
	return nil
}

// crashTo sends the report of a crash (an unrecovered panic, a fatal
// error) to terminal as well as to stderr, while stderr goes to the log;
// nil stops that. A library that panics then still shows on the terminal.
func crashTo(terminal *os.File) {
	if terminal == os.Stderr {
		return
	}
	_ = debug.SetCrashOutput(terminal, debug.CrashOptions{})
}

// redirectStderr points file descriptor 2 at the log w (when w is a file
// other than stderr), so that what libraries write to stderr through
// loggers built at init (the apiserver's etcd client) lands in the log. It
// returns a file for the terminal's stderr, which the caller keeps using,
// and a function that points descriptor 2 back at the terminal, so that the
// command's own error reaches the user.
func redirectStderr(w io.Writer) (terminal *os.File, restore func()) {
	f, ok := w.(*os.File)
	if !ok || f == os.Stderr {
		return os.Stderr, func() {}
	}
	saved, err := unix.Dup(2)
	if err != nil {
		return os.Stderr, func() {}
	}
	if err := unix.Dup2(int(f.Fd()), 2); err != nil {
		unix.Close(saved)
		return os.Stderr, func() {}
	}
	// The restore function holds the terminal's file: were it collected,
	// its finalizer would close the saved descriptor, and descriptor 2
	// could not be pointed back (the command's error would go to the log).
	terminal = os.NewFile(uintptr(saved), "/dev/stderr")
	return terminal, func() { _ = unix.Dup2(int(terminal.Fd()), 2) }
}

// logToFile sends the components' klog output and what libraries write to
// stderr to the log file at path (- for stderr), for a command that
// reports its own progress: it returns the terminal's stderr for that, and
// a function that undoes it all.
func logToFile(path string) (terminal *os.File, done func(), err error) {
	logOut, closeLog, err := openLog(path)
	if err != nil {
		return nil, nil, err
	}
	if err := setupKlog(logOut, 0); err != nil {
		closeLog()
		return nil, nil, err
	}
	terminal, restore := redirectStderr(logOut)
	return terminal, func() { restore(); closeLog() }, nil
}

func openLog(path string) (io.Writer, func(), error) {
	if path == "-" {
		return os.Stderr, func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("log file: %w", err)
	}
	return f, func() { f.Close() }, nil
}
