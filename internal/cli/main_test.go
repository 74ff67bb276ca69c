package cli

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets tests run the pkie CLI as a real child process (to kill it
// with SIGKILL, say): with PKIE_CLI_CHILD=1 the test binary is pkie, its
// signals turned into the context's cancellation as cmd/pkie does.
func TestMain(m *testing.M) {
	if os.Getenv("PKIE_CLI_CHILD") == "1" {
		// A lowered open-file limit for this child alone: lowering the
		// test process's own would starve the other tests.
		if n := os.Getenv("PKIE_CLI_CHILD_NOFILE"); n != "" {
			if err := setFileLimit(n); err != nil {
				panic(err)
			}
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, OSEnv(), os.Args[1:])
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// child is a pkie process started by a test.
type child struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
}

// startChild runs "pkie args..." in a child process.
func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PKIE_CLI_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdout: bufio.NewReader(out)}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return c
}

// waitLine returns the first stdout line starting with prefix.
func (c *child) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	lines := make(chan string, 1)
	go func() {
		for {
			l, err := c.stdout.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			if strings.HasPrefix(l, prefix) {
				lines <- strings.TrimSpace(strings.TrimPrefix(l, prefix))
				return
			}
		}
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("child exited before printing %q", prefix)
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("child did not print %q within 30 s", prefix)
	}
	return ""
}
