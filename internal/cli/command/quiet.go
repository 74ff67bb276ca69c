package command

import (
	"io"
	"log/slog"
	"os"

	"k8s.io/klog/v2"
)

// QuietStorage silences the logs of the storage libraries an in-process
// CT log links (Tessera logs through klog; the Badger index of its
// antispam writes to the os.Stderr it finds when opened) for a command
// that runs such a log as a fixture, not as its job: pkie demo and the
// benchmarks, whose own output those lines would bury. It returns the
// function that restores them. os.Stderr is swapped only when env's
// stderr is the process's own (from the command line, not a test), and
// env.Stderr keeps writing where it did.
func QuietStorage(env *Env) (restore func()) {
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if env.Stderr != os.Stderr {
		return func() {}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, r); close(done) }()
	saved := os.Stderr
	os.Stderr = w
	return func() {
		os.Stderr = saved
		w.Close()
		<-done
	}
}
