package verify

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Helper is a back end that runs as a separate program speaking the
// helper protocol. It sends one request at a time. A helper that answers
// out of protocol, exits or outlives the timeout is killed and the request
// gets an error, never a verdict; the next request starts a fresh process.
type Helper struct {
	name, path string
	timeout    time.Duration

	mu      sync.Mutex
	proc    *helperProc
	library string
	nextID  uint64
}

type helperProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan lineOrErr
	stderr  *tail
	exited  chan struct{}
	quit    chan struct{} // closed by kill and Close: nobody reads lines any more
	waitErr error
}

type lineOrErr struct {
	line []byte
	err  error
}

// DefaultHelperTimeout bounds one exchange with a helper.
const DefaultHelperTimeout = 10 * time.Second

// StartHelper starts the helper program at path and reads its hello. name
// is the back end's expected name (the hello must agree); timeout bounds
// the hello and each later exchange (0 means DefaultHelperTimeout).
func StartHelper(ctx context.Context, name, path string, timeout time.Duration) (*Helper, error) {
	if timeout <= 0 {
		timeout = DefaultHelperTimeout
	}
	h := &Helper{name: name, path: path, timeout: timeout}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.start(ctx); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Helper) start(ctx context.Context) error {
	cmd := exec.Command(h.path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("%s helper: %w", h.name, err)
	}
	// Our own pipe rather than StdoutPipe: Wait closes a StdoutPipe as
	// soon as the process exits, racing the reader for the helper's last
	// words; this one is closed by the reader at end of input.
	stdout, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("%s helper: %w", h.name, err)
	}
	cmd.Stdout = w
	p := &helperProc{cmd: cmd, stdin: stdin, lines: make(chan lineOrErr, 1), stderr: &tail{max: 2048}, exited: make(chan struct{}), quit: make(chan struct{})}
	cmd.Stderr = p.stderr
	err = cmd.Start()
	w.Close()
	if err != nil {
		stdout.Close()
		return fmt.Errorf("%s helper: starting %s: %w", h.name, h.path, err)
	}
	go func() { readLines(stdout, p.lines, p.quit); stdout.Close() }()
	go func() { p.waitErr = cmd.Wait(); close(p.exited) }()
	h.proc = p
	line, err := h.receive(ctx)
	if err != nil {
		return fmt.Errorf("%s helper %s: no hello: %w", h.name, h.path, err)
	}
	hello, err := DecodeHello(line)
	if err != nil {
		h.kill()
		return fmt.Errorf("%s helper %s: %w", h.name, h.path, err)
	}
	if hello.Backend != h.name {
		h.kill()
		return fmt.Errorf("%s helper %s: says it is %q", h.name, h.path, hello.Backend)
	}
	h.library = hello.Library
	return nil
}

// readLines sends each line of r (newline removed) to out, then the error
// that ended reading. A line longer than MaxAnswerLine ends reading, and so
// does quit.
func readLines(r io.Reader, out chan<- lineOrErr, quit <-chan struct{}) {
	send := func(l lineOrErr) bool {
		select {
		case out <- l:
			return true
		case <-quit:
			return false
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		var line []byte
		for {
			frag, err := br.ReadSlice('\n')
			line = append(line, frag...)
			if len(line) > MaxAnswerLine+1 {
				send(lineOrErr{err: fmt.Errorf("line longer than %d bytes", MaxAnswerLine)})
				return
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				if len(line) > 0 && err == io.EOF {
					err = errors.New("last line has no newline")
				}
				send(lineOrErr{err: err})
				return
			}
			break
		}
		if !send(lineOrErr{line: bytes.TrimRight(line, "\r\n")}) {
			return
		}
	}
}

// receive waits for the helper's next line. On any failure it kills the
// helper and says why, with what it wrote to standard error.
func (h *Helper) receive(ctx context.Context) ([]byte, error) {
	p := h.proc
	timer := time.NewTimer(h.timeout)
	defer timer.Stop()
	select {
	case l := <-p.lines:
		if l.err == nil {
			return l.line, nil
		}
		if l.err == io.EOF {
			h.kill()
			return nil, fmt.Errorf("exited (%v)%s", p.waitErr, p.stderr.says())
		}
		h.kill()
		return nil, fmt.Errorf("%w%s", l.err, p.stderr.says())
	case <-timer.C:
		h.kill()
		return nil, fmt.Errorf("no answer within %v; killed%s", h.timeout, p.stderr.says())
	case <-ctx.Done():
		h.kill()
		return nil, ctx.Err()
	}
}

// kill ends the helper process and waits for it.
func (h *Helper) kill() {
	p := h.proc
	if p == nil {
		return
	}
	h.proc = nil
	close(p.quit)
	p.stdin.Close()
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Name implements Backend.
func (h *Helper) Name() string { return h.name }

// Library implements Backend: the library as the helper reported it.
func (h *Helper) Library() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.library
}

// Verify implements Backend.
func (h *Helper) Verify(ctx context.Context, r *Request) (Result, error) {
	if err := r.Check(); err != nil {
		return Result{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc == nil {
		if err := h.start(ctx); err != nil {
			return Result{}, err
		}
	}
	h.nextID++
	id := h.nextID
	req, err := EncodeRequest(id, r)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	p := h.proc
	werr := make(chan error, 1)
	go func() { _, err := p.stdin.Write(req); werr <- err }()
	line, err := h.receive(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("%s helper: %w", h.name, err)
	}
	if err := <-werr; err != nil {
		h.kill()
		return Result{}, fmt.Errorf("%s helper: writing the request: %w", h.name, err)
	}
	res, err := DecodeAnswer(line, id)
	if err != nil {
		var he *HelperError
		if !errors.As(err, &he) {
			// Out of protocol: nothing it says next can be trusted.
			h.kill()
		}
		return Result{}, fmt.Errorf("%s helper: %w", h.name, err)
	}
	res.Backend = h.name
	res.RoundTrip = time.Since(start)
	return res, nil
}

// Close implements Backend: it ends the helper, letting it exit at end of
// input first.
func (h *Helper) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.proc
	if p == nil {
		return nil
	}
	p.stdin.Close()
	select {
	case <-p.exited:
		h.proc = nil
		close(p.quit)
		return nil
	case <-time.After(time.Second):
	}
	h.kill()
	return nil
}

// tail keeps the last bytes written to it: a helper's standard error.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// says returns ": " and the helper's last standard-error line, or "".
func (t *tail) says() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return ""
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return ": " + s
}
