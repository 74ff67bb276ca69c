package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/cli/serve"
)

// TestOBCServeSuggestionWorks runs "pkie obc serve" as a user would (text
// output), takes the commands it suggests (log in, who am I, log out), and
// runs them with "pkie obc get": each succeeds in turn with a cookie jar,
// "who am I" shows the user, and after logout a jar kept from before it
// gets 401. An answer that is not 2xx (who am I before logging in) exits 1.
func TestOBCServeSuggestionWorks(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	logs := &lockedBuffer{}
	env := &Env{Stdin: strings.NewReader(""), Stdout: pw, Stderr: logs, Getenv: func(string) string { return "" }}
	done := make(chan error, 1)
	go func() {
		done <- serve.OBCServe(ctx, env, []string{"--addr", "127.0.0.1:0", "--write-cert", filepath.Join(dir, "site.pem")})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("obc serve: %v", err)
		}
	})
	var suggested []string
	sc := bufio.NewScanner(pr)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "cookie key:") {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "pkie obc get ") {
			suggested = append(suggested, line)
		}
	}
	go io.Copy(io.Discard, pr)
	if len(suggested) != 3 {
		t.Fatalf("obc serve suggests %d commands, want login, whoami, logout: %q\n%s", len(suggested), suggested, logs.String())
	}
	jar := filepath.Join(dir, "jar.json")
	store := filepath.Join(dir, "obc.db")
	run := func(line string, jarFile string) (int, string, string) {
		t.Helper()
		args := strings.Fields(line)[1:] // drop "pkie"
		for i, a := range args {
			if a == "obc-cookies.json" {
				args[i] = jarFile
			}
		}
		return runCLI(t, append(args[:2:2], append([]string{"--store", store}, args[2:]...)...)...)
	}
	login, whoami, logout := suggested[0], suggested[1], suggested[2]
	if !strings.Contains(login, "/login") || !strings.Contains(whoami, "/whoami") || !strings.Contains(logout, "/logout") {
		t.Fatalf("suggested commands in the wrong order: %q", suggested)
	}

	if code, out, errs := run(whoami, jar); code != ExitNegative || !strings.Contains(out, "401") || !strings.Contains(errs, "401") {
		t.Errorf("whoami before login: exit %d, want 1 for a 401\n%s\n%s", code, out, errs)
	}
	if code, out, errs := run(login, jar); code != ExitOK || !strings.Contains(out, "Logged in as <strong>alice</strong>") {
		t.Fatalf("login: exit %d\n%s\n%s", code, out, errs)
	}
	if fi, err := os.Stat(jar); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cookie jar: %v %v, want mode 0600", fi, err)
	}
	if code, out, errs := run(whoami, jar); code != ExitOK || !strings.Contains(out, "alice") {
		t.Fatalf("whoami after login: exit %d\n%s\n%s", code, out, errs)
	}
	kept := filepath.Join(dir, "kept.json")
	b, err := os.ReadFile(jar)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kept, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run(logout, jar); code != ExitOK {
		t.Fatalf("logout: exit %d\n%s\n%s", code, out, errs)
	}
	if b, _ := os.ReadFile(jar); strings.Contains(string(b), serve.OBCSessionCookie) {
		t.Errorf("the jar keeps the session cookie after logout:\n%s", b)
	}
	if code, out, _ := run(whoami, jar); code != ExitNegative || strings.Contains(out, "alice") {
		t.Errorf("whoami after logout: exit %d, want 1\n%s", code, out)
	}
	// The cookie kept from before logout, on the same key: the session is
	// ended on the server.
	if code, out, _ := run(whoami, kept); code != ExitNegative || !strings.Contains(out, "401") || strings.Contains(out, "Logged in as") {
		t.Errorf("whoami with the jar kept from before logout: exit %d, want 1 for a 401\n%s", code, out)
	}
}

// TestOBCGetExitStatus: "obc get" exits 0 only for a 2xx answer: /whoami
// without a session answers 401 and exits 1, naming the status on stderr;
// the home page answers 200 and exits 0.
func TestOBCGetExitStatus(t *testing.T) {
	dir := t.TempDir()
	st, _ := startOBCServe(t, "--write-cert", filepath.Join(dir, "site.pem"))
	store := filepath.Join(dir, "obc.db")
	for _, tc := range []struct {
		path string
		code int
		err  string
	}{
		{"/whoami", ExitNegative, "answered 401 Unauthorized"},
		{"/", ExitOK, ""},
	} {
		code, out, errs := runCLI(t, "obc", "get", "--store", store, "--cacert", st.CertFile, st.URL+tc.path)
		if code != tc.code || !strings.Contains(errs, tc.err) {
			t.Errorf("obc get %s: exit %d, stderr %q; want exit %d with %q\n%s", tc.path, code, errs, tc.code, tc.err, out)
		}
	}
}

type obcServeStart struct {
	Listening        string `json:"listening"`
	URL              string `json:"url"`
	Mode             string `json:"mode"`
	CertFile         string `json:"cert_file"`
	Pin              string `json:"pin_sha256"`
	BinderKeyCreated bool   `json:"binder_key_created"`
}

// startOBCServe runs "pkie obc serve --json args..." in this process and
// returns its startup line and a function that stops it and returns its log.
func startOBCServe(t *testing.T, args ...string) (obcServeStart, func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	logs := &lockedBuffer{}
	env := &Env{Stdin: strings.NewReader(""), Stdout: pw, Stderr: logs, Getenv: func(string) string { return "" }}
	done := make(chan error, 1)
	go func() {
		done <- serve.OBCServe(ctx, env, append([]string{"--json", "--addr", "127.0.0.1:0"}, args...))
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("obc serve exited (%v) before listening: %s", <-done, logs.String())
	}
	go io.Copy(io.Discard, pr)
	var st obcServeStart
	if err := json.Unmarshal([]byte(line), &st); err != nil || st.Listening == "" {
		t.Fatalf("startup line %q: %v", line, err)
	}
	stopped := false
	stop := func() string {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("obc serve: %v: %s", err, logs.String())
			}
		}
		return logs.String()
	}
	t.Cleanup(func() { stop() })
	return st, stop
}
