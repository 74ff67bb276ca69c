//go:build unix

package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/revocation"
	revprover "github.com/pkie/pkie/internal/provers/revocation"
	"github.com/pkie/pkie/internal/testbed"
)

// TestCloudSessionsLeaveDescriptors: a cloud process
// with an open-file limit of 400 is flooded with 500 TCP connections that
// never finish their handshake (a 60s handshake timeout keeps them open).
// Its sessions are bounded below the limit, so the rest are refused while
// /healthz still answers and its revocation prover still syncs a newly
// published head; no line of its log says "too many open files".
func TestCloudSessionsLeaveDescriptors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cloud process and opens 500 connections")
	}
	ctx := context.Background()
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "cloud")
	ctConf, revConf := filepath.Join(dir, "ct.json"), filepath.Join(dir, "rev.json")
	ctc := ttp.CTProverConfig()
	ctc.SyncInterval = ct.Duration(100 * time.Millisecond)
	os.WriteFile(ctConf, ctc.JSON(), 0o644)
	os.WriteFile(revConf, revprover.ProverConfig{AuthorityURL: ttp.RevocationURL, AuthorityKey: ttp.RevocationKey,
		SyncInterval: revocation.Duration(100 * time.Millisecond)}.JSON(), 0o644)
	if code, _, errs := runCLI(t, "cloud", "init", "--data", data, "--name", "pec.test", "--pkie", "ct="+ctConf, "--pkie", "revocation="+revConf); code != 0 {
		t.Fatalf("init: %s", errs)
	}

	var stderr lockedBuffer
	cmd := exec.Command(os.Args[0], "cloud", "serve", "--data", data, "--quic", "", "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--trust-first-head", "--handshake-timeout", "60s")
	cmd.Env = append(os.Environ(), "PKIE_CLI_CHILD=1", "PKIE_CLI_CHILD_NOFILE=400")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdout: bufio.NewReader(out)}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	tcpAddr := c.waitLine(t, "listening tcp")
	httpURL := "http://" + c.waitLine(t, "listening http")

	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for range 500 {
		nc, err := net.DialTimeout("tcp", tcpAddr, 10*time.Second)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, nc)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string, error) {
		resp, err := hc.Get(httpURL + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	// 400 less the 256 kept for everything else: 144 sessions, the other
	// 356 connections refused, each closed at once.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, m, err := get("/metrics")
		if err == nil && strings.Contains(m, `pkie_cloud_connections_refused_total{bound="sessions"} 356`) && strings.Contains(m, "pkie_cloud_sessions 144") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions not bounded at 144 of an open-file limit of 400: %v\n%s\nlog:\n%s", err, grepLines(m, "pkie_cloud_sessions", "refused"), stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body, err := get("/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz with sessions at their bound: %d %s %v\nlog:\n%s", code, body, err, stderr.String())
	}
	// A new head is synced although sessions are at their bound.
	states, _ := filepath.Glob(filepath.Join(data, "pkies", "revocation", "*.state"))
	if len(states) != 1 {
		t.Fatalf("revocation state files: %v", states)
	}
	before, _ := os.ReadFile(states[0])
	time.Sleep(time.Millisecond) // a head of another millisecond
	if _, err := ttp.Revocation.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		now, _ := os.ReadFile(states[0])
		if len(now) > 0 && !bytes.Equal(now, before) {
			break
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("the revocation prover did not sync the new head with sessions at their bound\nlog:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(stderr.String(), "too many open files") {
		t.Errorf("the cloud ran out of descriptors:\n%s", stderr.String())
	}
}

// TestCloudServeRefusesSessionsOverFileLimit: an explicit --max-sessions
// above what the open-file limit allows is refused before anything is
// loaded or synced, naming the limit.
func TestCloudServeRefusesSessionsOverFileLimit(t *testing.T) {
	code, _, errs := runCLI(t, "cloud", "serve", "--data", filepath.Join(t.TempDir(), "none"), "--max-sessions", "1000000000")
	if code != ExitUsage || !strings.Contains(errs, "open-file limit") || !strings.Contains(errs, "--max-sessions asks for 1000000000") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
