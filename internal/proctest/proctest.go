// Package proctest is what tests share that start a real server process
// from the machine's packages (PostgreSQL, MariaDB, TesseraCT): a missing
// program skips the test, except under CI, whose .ci/run must have installed
// it; a server that refuses to run as root runs as an unprivileged user, in
// directories it owns; and a server dies with the test process that started
// it, so a test killed at its timeout leaves none behind.
package proctest

import (
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
	"testing"
)

// Require skips t when err says a program is missing, or fails it under CI
// (CI set in the environment), naming what CI must install.
func Require(t testing.TB, pkg string, err error, install string) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s: %v (CI must install %s)", pkg, err, install)
	}
	t.Skipf("%s: %v", pkg, err)
}

// Runner starts a server's commands as the user it must run as: the test's
// own, or, when the test runs as root, the first of the given users that
// exists.
type Runner struct {
	uid, gid int
	other    bool
}

// NewRunner returns the Runner for a server that refuses root, failing t
// when the test runs as root and none of names exists.
func NewRunner(t testing.TB, pkg, server string, names ...string) *Runner {
	t.Helper()
	if os.Geteuid() != 0 {
		return &Runner{}
	}
	for _, name := range names {
		if u, err := user.Lookup(name); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			return &Runner{uid: uid, gid: gid, other: true}
		}
	}
	t.Fatalf("%s: running as root and no unprivileged user (%v) to run %s as", pkg, names, server)
	return nil
}

// Own makes path the server user's, mode 0700.
func (r *Runner) Own(path string) error {
	if !r.other {
		return nil
	}
	if err := os.Chmod(path, 0o700); err != nil {
		return err
	}
	return os.Chown(path, r.uid, r.gid)
}

// Command is exec.Command run as the server's user, with LC_ALL=C.
func (r *Runner) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if r.other {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid)}}
	}
	return cmd
}
