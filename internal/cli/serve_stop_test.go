package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
)

// TestServeStartAndStop runs every serve command of this package as a real
// pkie process, as an operator would: each prints its startup information
// (with --json one JSON object on the first line of stdout, with the
// addresses, keys and data directory, and JSON logs), and each, stopped by
// SIGTERM (which cmd/pkie turns into the context's cancellation), exits 0
// after logging one line that says it stopped and why.
func TestServeStartAndStop(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	ca, err := testbed.NewRootCA("Serve Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, p("root.pem"), "CERTIFICATE", ca.Cert.Raw)
	for _, init := range [][]string{
		{"notary", "init", "--data", p("notary"), "--name", "n.test"},
		{"log", "init", "--data", p("log"), "--origin", "log.test", "--roots", p("root.pem")},
		{"revocation", "init", "--data", p("rev"), "--origin", "rev.test"},
		{"revocation", "init", "--data", p("rev2"), "--origin", "rev2.test"},
		{"cloud", "init", "--data", p("cloud"), "--name", "pec.test"},
		{"forwarder", "init", "--data", p("fwd"), "--name", "fwd.test"},
	} {
		if code, _, errOut := runCLI(t, init...); code != ExitOK {
			t.Fatalf("%v: exit %d: %s", init, code, errOut)
		}
	}
	code, bundle, errOut := runCLI(t, "cloud", "bundle", "--data", p("cloud"), "--point", "127.0.0.1:4433")
	if code != ExitOK {
		t.Fatalf("cloud bundle: %d %s", code, errOut)
	}
	if err := os.WriteFile(p("cloud.json"), []byte(bundle), 0o644); err != nil {
		t.Fatal(err)
	}
	// The prover mirrors an authority of its own.
	ra := startChild(t, "revocation", "serve", "--data", p("rev2"), "--listen", "127.0.0.1:0")
	raURL := "http://" + ra.waitLine(t, "listening ")

	for _, tc := range []struct {
		name string
		args []string
		msg  string   // of the stop line
		keys []string // of the --json startup object
	}{
		{"notary", []string{"notary", "serve", "--data", p("notary"), "--listen", "127.0.0.1:0"},
			"notary stopped", []string{"listening", "name", "certificate_sha256", "pkie_v1_ed25519", "data", "store"}},
		{"log", []string{"log", "serve", "--data", p("log"), "--listen", "127.0.0.1:0"},
			"log stopped", []string{"listening", "origin", "verifier_key", "head_verifier_key", "data", "storage"}},
		{"revocation", []string{"revocation", "serve", "--data", p("rev"), "--listen", "127.0.0.1:0"},
			"revocation authority stopped", []string{"listening", "origin", "verifier_key", "data"}},
		{"prover", []string{"prover", "serve", "--revocation", raURL, "--revocation-key", "@" + p("rev2/revocation.pub"), "--state", p("prover"), "--listen", "127.0.0.1:0"},
			"prover stopped", []string{"listening", "revocation", "state"}},
		{"cloud", []string{"cloud", "serve", "--data", p("cloud"), "--quic", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"},
			"cloud stopped", []string{"listening", "name", "spki_sha256", "pkies", "data"}},
		{"forwarder", []string{"forwarder", "serve", "--data", p("fwd"), "--cloud", p("cloud.json"), "--quic", "127.0.0.1:0", "--tcp", "", "--http", ""},
			"forwarder stopped", []string{"listening", "name", "spki_sha256", "clouds", "data"}},
	} {
		// The commands side by side (a race-built pkie takes a second to
		// start); each one's two runs in turn, on the same data directory.
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, asJSON := range []bool{false, true} {
				name := "text"
				args := tc.args
				if asJSON {
					name = "json"
					args = append(args[:len(args):len(args)], "--json")
				}
				t.Run(name, func(t *testing.T) {
					logPath := filepath.Join(t.TempDir(), "stderr")
					c := startChildLogged(t, logPath, args...)
					if asJSON {
						var start map[string]any
						if err := json.Unmarshal([]byte("{"+c.waitLine(t, "{")), &start); err != nil {
							t.Fatalf("startup line: %v", err)
						}
						for _, k := range tc.keys {
							if v, ok := start[k]; !ok || v == "" || v == nil {
								t.Errorf("startup object has no %q: %v", k, start)
							}
						}
					} else {
						c.waitLine(t, "listening ")
					}
					if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
						t.Fatal(err)
					}
					exited := make(chan error, 1)
					go func() { exited <- c.cmd.Wait() }()
					select {
					case err := <-exited:
						if err != nil {
							t.Fatalf("exit after SIGTERM: %v", err)
						}
					case <-time.After(30 * time.Second):
						t.Fatal("still running 30 s after SIGTERM")
					}
					logs, err := os.ReadFile(logPath)
					if err != nil {
						t.Fatal(err)
					}
					var last string
					sc := bufio.NewScanner(strings.NewReader(string(logs)))
					for sc.Scan() {
						l := sc.Text()
						if asJSON && !json.Valid([]byte(l)) {
							t.Errorf("--json log line is no JSON: %q", l)
						}
						last = l
					}
					want := `msg="` + tc.msg + `" cause="` + syscall.SIGTERM.String()
					if asJSON {
						var rec struct{ Msg, Cause string }
						json.Unmarshal([]byte(last), &rec)
						last = `msg="` + rec.Msg + `" cause="` + rec.Cause
					}
					if !strings.Contains(last, want) {
						t.Fatalf("last log line %q, want %q…; log:\n%s", last, want, logs)
					}
				})
			}
		})
	}
}

// TestBundleJSON: notary, cloud and forwarder bundle take --json, as every
// command that prints results does: one object holding the bundle the
// command prints without it, beside the data directory and the keys the
// bundle pins.
func TestBundleJSON(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, init := range [][]string{
		{"notary", "init", "--data", p("notary"), "--name", "n.test"},
		{"cloud", "init", "--data", p("cloud"), "--name", "pec.test"},
		{"forwarder", "init", "--data", p("fwd"), "--name", "fwd.test"},
	} {
		if code, _, errOut := runCLI(t, init...); code != ExitOK {
			t.Fatalf("%v: exit %d: %s", init, code, errOut)
		}
	}
	for _, tc := range []struct {
		args []string
		keys []string
	}{
		{[]string{"notary", "bundle", "--data", p("notary"), "--host", "n.test"}, []string{"data", "certificate_sha256", "pkie_v1_ed25519"}},
		{[]string{"cloud", "bundle", "--data", p("cloud"), "--point", "pec.test:4433"}, []string{"data", "name", "pkies", "spki_sha256"}},
		{[]string{"forwarder", "bundle", "--data", p("fwd"), "--point", "fwd.test:4443"}, []string{"data", "name", "spki_sha256"}},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			code, plain, errOut := runCLI(t, tc.args...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			code, out, errOut := runCLI(t, append(tc.args, "--json")...)
			if code != ExitOK {
				t.Fatalf("--json: exit %d: %s", code, errOut)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("--json: %v\n%s", err, out)
			}
			var inJSON, alone any
			json.Unmarshal(got["bundle"], &inJSON)
			json.Unmarshal([]byte(plain), &alone)
			a, _ := json.Marshal(inJSON)
			b, _ := json.Marshal(alone)
			if len(a) < 10 || string(a) != string(b) {
				t.Errorf("--json bundle differs from the bundle printed without it:\n%s\n%s", a, b)
			}
			for _, k := range tc.keys {
				if v := got[k]; len(v) == 0 || string(v) == `""` {
					t.Errorf("--json has no %q:\n%s", k, out)
				}
			}
			if d := string(got["data"]); d != `"`+tc.args[3]+`"` {
				t.Errorf("--json data %s, want %q", d, tc.args[3])
			}
		})
	}
}
