package command

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// storageLog is where the lines of Tessera (which logs through klog) go.
// klog's logger is process-wide and read, unsynchronised, by the
// goroutines a Tessera log leaves running; setting it per command would
// race with those an earlier command (or test) started. So klog is pointed
// once, before any goroutine exists, at a handler that forwards each line
// to the handler a command chose, swapped atomically. Unset, lines go to
// slog's default logger.
var storageLog atomic.Pointer[slog.Handler]

func init() {
	klog.SetSlogLogger(slog.New(forward{}))
}

// SetStorageLog sends the storage libraries' klog lines to h until the
// returned function restores the previous choice: pkie log serve sends them
// into its own (JSON) log rather than around it.
func SetStorageLog(h slog.Handler) (restore func()) {
	prev := storageLog.Swap(&h)
	return func() { storageLog.Store(prev) }
}

// forward is klog's slog handler: the handler of the moment, with the
// attributes and groups klog attached applied to it at each line.
type forward struct {
	with []func(slog.Handler) slog.Handler
}

func (f forward) target() slog.Handler {
	h := slog.Default().Handler()
	if p := storageLog.Load(); p != nil {
		h = *p
	}
	for _, w := range f.with {
		h = w(h)
	}
	return h
}

func (f forward) Enabled(ctx context.Context, l slog.Level) bool {
	return f.target().Enabled(ctx, l)
}

func (f forward) Handle(ctx context.Context, r slog.Record) error {
	return f.target().Handle(ctx, r)
}

func (f forward) WithAttrs(as []slog.Attr) slog.Handler {
	return forward{with: append(f.with[:len(f.with):len(f.with)], func(h slog.Handler) slog.Handler { return h.WithAttrs(as) })}
}

func (f forward) WithGroup(name string) slog.Handler {
	return forward{with: append(f.with[:len(f.with):len(f.with)], func(h slog.Handler) slog.Handler { return h.WithGroup(name) })}
}

// QuietStorage silences the logs of the storage libraries an in-process
// CT log links (Tessera logs through klog; the Badger index of its
// antispam writes to the os.Stderr it finds when opened) for a command
// that runs such a log as a fixture, not as its job: pkie demo and the
// benchmarks, whose own output those lines would bury. It returns the
// function that restores them. os.Stderr is swapped only when env's
// stderr is the process's own (from the command line, not a test), and
// env.Stderr keeps writing where it did.
func QuietStorage(env *Env) (restore func()) {
	restoreLog := SetStorageLog(slog.DiscardHandler)
	if env.Stderr != os.Stderr {
		return restoreLog
	}
	r, w, err := os.Pipe()
	if err != nil {
		return restoreLog
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, r); close(done) }()
	saved := os.Stderr
	os.Stderr = w
	return func() {
		os.Stderr = saved
		w.Close()
		<-done
		restoreLog()
	}
}
