// Package mysqltest starts a throwaway MariaDB server from the installed
// server binaries for tests that need a real MySQL-compatible database (the
// log's Tessera MySQL storage). Where the binaries are missing a test is
// skipped, except under CI (CI set in the environment), where their absence
// is a failure: .ci/run installs them (scripts/deps.sh, Debian's
// mariadb-server).
//
// Each Server lives in a temporary directory of its own, listens on a free
// loopback port and is stopped when the test ends. Its root account has no
// password and is reachable over TCP from 127.0.0.1 only.
package mysqltest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/pkie/pkie/internal/proctest"
)

// Server is a running throwaway MariaDB server.
type Server struct {
	// DSN names the server's empty database "pkie" as the root user, in
	// github.com/go-sql-driver/mysql's form, with no parameters: append
	// "?multiStatements=true" (say) to apply a schema file.
	DSN string
	// Addr is the server's host:port on loopback.
	Addr string

	t       testing.TB
	server  string // mariadbd
	dir     string
	port    int
	run     *proctest.Runner
	dbs     atomic.Int64
	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped chan struct{}
}

// binaries finds mariadb-install-db and mariadbd (or their MySQL-era
// names, which Debian keeps as links).
func binaries() (install, server string, err error) {
	look := func(names ...string) string {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return p
			}
			for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"} {
				p := filepath.Join(d, n)
				if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
					return p
				}
			}
		}
		return ""
	}
	install = look("mariadb-install-db", "mysql_install_db")
	server = look("mariadbd", "mysqld")
	if install == "" || server == "" {
		return "", "", fmt.Errorf("no MariaDB server binaries (mariadb-install-db and mariadbd) on PATH or under /usr/sbin")
	}
	return install, server, nil
}

// Start initialises a fresh data directory in a temporary directory, starts
// MariaDB on a free loopback port, creates the database "pkie" and stops the
// server when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	install, server, err := binaries()
	proctest.Require(t, "mysqltest", err, "mariadb-server")
	// mariadbd refuses to run as root unless told to; run it as an
	// unprivileged user instead, as Debian's service does.
	s := &Server{t: t, server: server, run: proctest.NewRunner(t, "mysqltest", "MariaDB", "mysql", "nobody")}
	s.dir, err = os.MkdirTemp("", "pkie-mysqltest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(s.dir) })
	if err := s.run.Own(s.dir); err != nil {
		t.Fatal(err)
	}
	// --no-defaults: the machine's /etc/mysql configuration (its socket,
	// its data directory) is not ours. The root account gets no password
	// (authentication method "normal" instead of Debian's unix_socket) so
	// that a TCP DSN reaches it.
	out, err := s.run.Command(install, "--no-defaults", "--datadir="+filepath.Join(s.dir, "data"),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve").CombinedOutput()
	if err != nil {
		t.Fatalf("mysqltest: mariadb-install-db: %v\n%s", err, out)
	}
	t.Cleanup(s.Stop)
	// The port is picked free and then bound by mariadbd, so another
	// process may take it in between: mariadbd then exits, and is started
	// again on another port.
	for attempt := 1; ; attempt++ {
		s.port = pickPort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		err := s.start()
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			t.Fatalf("mysqltest: %v", err)
		}
	}
	if err := s.exec("CREATE DATABASE pkie"); err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	s.DSN = s.dsn("pkie")
	return s
}

// NewDatabase creates another empty database on s and returns its DSN (in
// the form of Server.DSN): tests that share one server keep their tables
// apart.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("pkie%d", s.dbs.Add(1))
	if err := s.exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	return s.dsn(name)
}

func (s *Server) dsn(db string) string {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = s.Addr
	c.DBName = db
	return c.FormatDSN()
}

// exec runs one statement as root without a default database.
func (s *Server) exec(stmt string) error {
	db, err := sql.Open("mysql", s.dsn(""))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

var errPortTaken = errors.New("mariadbd's port was taken before it bound it")

// start starts mariadbd on s.port and waits until it accepts connections.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	logPath := filepath.Join(s.dir, "mariadb.log")
	os.Remove(logPath) // each start's log is its own
	cmd := s.run.Command(s.server, "--no-defaults",
		"--datadir="+filepath.Join(s.dir, "data"),
		"--socket="+filepath.Join(s.dir, "sock"),
		"--pid-file="+filepath.Join(s.dir, "mariadb.pid"),
		"--tmpdir="+s.dir,
		"--log-error="+logPath,
		"--bind-address=127.0.0.1", "--port="+strconv.Itoa(s.port),
		"--skip-name-resolve", "--skip-log-bin",
		"--max-connections=200", "--innodb-buffer-pool-size=32M")
	cmd.SysProcAttr = proctest.DieWithParent(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting mariadbd: %w", err)
	}
	s.cmd = cmd
	s.stopped = make(chan struct{})
	go func(stopped chan struct{}) { cmd.Wait(); close(stopped) }(s.stopped)
	db, err := sql.Open("mysql", s.dsn(""))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.stopped:
			s.cmd = nil
			log, _ := os.ReadFile(logPath)
			if bytes.Contains(log, []byte("Address already in use")) {
				return errPortTaken
			}
			return fmt.Errorf("mariadbd exited during start-up:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("mariadbd did not accept connections within 30 s: %w\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill stops the server with SIGKILL, as a crash would, and starts it again
// on the same data directory and port: what was committed must survive.
func (s *Server) Kill() {
	s.t.Helper()
	s.mu.Lock()
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.stopped
	s.mu.Unlock()
	if err := s.start(); err != nil {
		s.t.Fatalf("mysqltest: restarting after SIGKILL: %v", err)
	}
}

// Stop shuts the server down.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM) // orderly shutdown
	select {
	case <-s.stopped:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.stopped
	}
	s.cmd = nil
}

// pickPort picks the server's port; the package's own test replaces it
// to hand out a taken one.
var pickPort = freePort

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
