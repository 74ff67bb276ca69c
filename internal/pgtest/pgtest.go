// Package pgtest starts a throwaway PostgreSQL server from the installed
// server binaries for tests that need the real database. Where the binaries
// are missing a test is skipped, except under CI (CI set in the environment),
// where their absence is a failure: .ci/run installs them.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pkie/pkie/internal/proctest"
)

// Server is a running throwaway PostgreSQL server.
type Server struct {
	DSN string

	t       testing.TB
	bin     string
	dir     string
	port    int
	run     *proctest.Runner
	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped chan struct{}
}

// binDir finds the directory holding initdb and postgres.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if q, err := filepath.EvalSymlinks(p); err == nil {
			p = q
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb) on PATH or under /usr/lib/postgresql")
}

// Start initialises a fresh cluster in a temporary directory, starts it on a
// free loopback port and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := binDir()
	proctest.Require(t, "pgtest", err, "postgresql")
	// PostgreSQL refuses to run as root; run it as an unprivileged user.
	s := &Server{t: t, bin: bin, run: proctest.NewRunner(t, "pgtest", "PostgreSQL", "postgres", "nobody")}
	s.dir, err = os.MkdirTemp("", "pkie-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(s.dir) })
	if err := s.run.Own(s.dir); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(s.dir, "data")
	out, err := s.run.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8").CombinedOutput()
	if err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	s.port = freePort(t)
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := s.run.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"),
		"-p", strconv.Itoa(s.port), "-k", s.dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB")
	logf, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err == nil {
		s.run.Own(logf.Name())
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("pgtest: starting postgres: %v", err)
	}
	s.cmd = cmd
	s.stopped = make(chan struct{})
	go func(stopped chan struct{}) { cmd.Wait(); close(stopped) }(s.stopped)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.DSN)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return
		}
		select {
		case <-s.stopped:
			log, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
			s.t.Fatalf("pgtest: postgres exited during start-up:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("pgtest: postgres did not accept connections within 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill stops the server with SIGKILL, as a crash would, and starts it again
// on the same data directory: what was committed must survive.
func (s *Server) Kill() {
	s.t.Helper()
	s.mu.Lock()
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.stopped
	s.mu.Unlock()
	// Children of the killed postmaster exit once they notice; give the
	// shared memory segment time to be released before restarting.
	time.Sleep(200 * time.Millisecond)
	s.start()
}

// Stop shuts the server down.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
	select {
	case <-s.stopped:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.stopped
	}
	s.cmd = nil
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
