package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/cli/command"
)

// TestHelpAfterAValueFlag: -h right after a flag that takes a value asks
// for help, as verify's usage tells people to type ("--corpus -h"); the
// flag package alone would take -h as the value and fail.
func TestHelpAfterAValueFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--corpus", "-h"}, "Runs every back end over a corpus"},
		{[]string{"verify", "--corpus", "known", "--plot", "--help"}, "Runs every back end over a corpus"},
		{[]string{"check", "--notaries", "-h"}, "Usage: pkie check"},
		{[]string{"scan", "--out", "-help"}, "Usage: pkie scan"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != ExitOK || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %.300q (want 0 and the usage %q); stdout %.200s", code, errOut, tc.want, out)
			}
		})
	}
	// After "--", -h is an argument like any other.
	if code, _, errOut := runCLI(t, "scan", "--", "-h"); code != ExitUsage || !strings.Contains(errOut, "site list") {
		t.Fatalf("scan -- -h: exit %d, %q", code, errOut)
	}
}

// TestBenchVerifyOutCreatesDirectory: --out names a directory of plots
// that need not exist yet, as replay report's --plots; a run is not lost
// for want of a mkdir. Both the measuring run and --from create it.
func TestBenchVerifyOutCreatesDirectory(t *testing.T) {
	dir := t.TempDir()
	plots := filepath.Join(dir, "new", "plots")
	code, out, errOut := runCLI(t, "bench", "verify", "--sites", "none", "--shapes", "rsa2048-2", "--n", "2",
		"--backends", "go", "--out", plots, "--json")
	if code != ExitOK {
		t.Fatalf("bench verify --out %s: exit %d: %s", plots, code, errOut)
	}
	if st, err := os.Stat(filepath.Join(plots, "verify-shapes.svg")); err != nil || st.Size() == 0 {
		t.Fatalf("no plot in the created directory: %v", err)
	}
	saved := filepath.Join(dir, "run.json")
	if err := os.WriteFile(saved, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(dir, "from", "plots")
	if code, _, errOut := runCLI(t, "bench", "verify", "--from", saved, "--out", again); code != ExitOK {
		t.Fatalf("bench verify --from --out %s: exit %d: %s", again, code, errOut)
	}
	if st, err := os.Stat(filepath.Join(again, "verify-shapes.png")); err != nil || st.Size() == 0 {
		t.Fatalf("no plot in the directory --from created: %v", err)
	}
}

// TestScanRefusesAListWithNoSite: a list that is empty, or whose every
// line is garbage, is a usage error (exit 2) naming the list, not a scan
// of nothing that exits 0; the garbage lines are named, and a file list
// is refused before --out is created. A list on stdin is refused after it
// is read.
func TestScanRefusesAListWithNoSite(t *testing.T) {
	dir := t.TempDir()
	garbage := "not a domain\nhttps://example.com/\n0,example.com\n\x00\x01\x02\n"
	for _, tc := range []struct {
		name, list string
		stdin      bool
		want       string
		skipped    int // "skipping" lines on stderr
	}{
		{"empty file", "", false, "holds no site", 0},
		{"comments only", "# rank,domain\n\n", false, "holds no site", 0},
		{"garbage file", garbage, false, "holds no valid site: all 4 entries are malformed", 4},
		{"empty stdin", "", true, "the site list on stdin holds no site", 0},
		{"garbage stdin", garbage, true, "the site list on stdin holds no valid site", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := "-"
			if !tc.stdin {
				list = filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".csv")
				if err := os.WriteFile(list, []byte(tc.list), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".jsonl")
			var stdout, stderr bytes.Buffer
			env := &Env{Stdin: strings.NewReader(tc.list), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
			code := Main(t.Context(), env, []string{"scan", "--quiet", "--out", out, list})
			if code != ExitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tc.want)
			}
			if n := strings.Count(stderr.String(), "pkie scan: skipping "); n != tc.skipped {
				t.Fatalf("%d malformed lines named, want %d:\n%s", n, tc.skipped, stderr.String())
			}
			if _, err := os.Stat(out); !tc.stdin && !os.IsNotExist(err) {
				t.Fatalf("refused scan created --out %s (%v)", out, err)
			}
		})
	}
}

// TestNotaryHostChecked: notary init and notary bundle take a DNS name or
// an IP address for --host and refuse anything else with the flag named,
// before any key is made; x509 would sign "bad host!" into a certificate.
func TestNotaryHostChecked(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		host, want string
	}{
		{"bad host!", `--host "bad host!" is not a DNS name or an IP address: ' ' is not allowed`},
		{"notary.example/x", `'/' is not allowed`},
		{"a..example", "empty label"},
		{"", "--host is empty"},
		{"[::1]", "without brackets"},
		{"fe80::1%eth0", "has a zone"},
	} {
		t.Run("init "+tc.host, func(t *testing.T) {
			data := filepath.Join(dir, "refused")
			code, _, errOut := runCLI(t, "notary", "init", "--data", data, "--host", tc.host)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Fatalf("refused init left %s (%v)", data, err)
			}
		})
	}
	data := filepath.Join(dir, "good")
	code, _, errOut := runCLI(t, "notary", "init", "--data", data, "--host", "notary.example", "--host", "2001:db8::7", "--host", "192.0.2.7", "--host", "under_score.example")
	if code != ExitOK {
		t.Fatalf("init with good hosts: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "notary", "bundle", "--data", data, "--host", "bad host!"); code != ExitUsage || !strings.Contains(errOut, `--host "bad host!" is not a DNS name`) {
		t.Fatalf("bundle --host 'bad host!': exit %d, %q", code, errOut)
	}
	if code, out, errOut := runCLI(t, "notary", "bundle", "--data", data, "--host", "2001:db8::7"); code != ExitOK || !strings.Contains(out, `"host": "2001:db8::7"`) {
		t.Fatalf("bundle --host 2001:db8::7: exit %d, %s %s", code, errOut, out)
	}
}

// TestTargetColons: a target with more than one colon outside brackets is
// refused, not looked up in DNS as one name; an IPv6 address takes
// brackets when a port follows, and may stand bare without one.
func TestTargetColons(t *testing.T) {
	for _, tc := range []struct {
		in   string
		host string
		port int
		bad  string
	}{
		{in: "example.com", host: "example.com", port: 443},
		{in: "example.com:8443", host: "example.com", port: 8443},
		{in: "[2001:db8::1]:8443", host: "2001:db8::1", port: 8443},
		{in: "[2001:db8::1]", host: "2001:db8::1", port: 443},
		{in: "2001:db8::1", host: "2001:db8::1", port: 443},
		{in: "::1", host: "::1", port: 443},
		// Read as the address it is: a port after a bare IPv6 address
		// cannot be told from its last group, hence the brackets.
		{in: "2001:db8::1:8443", host: "2001:db8::1:8443", port: 443},
		{in: "good:27441.nc.test:27441", bad: "more than one colon"},
		{in: "example.com:443:443", bad: "more than one colon"},
		{in: "2001:db8::1::2", bad: "more than one colon"},
		{in: "example.com:http", bad: `port "http"`},
	} {
		host, port, err := command.SplitHostPort(tc.in, 443)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%q: got %q %d, %v; want an error saying %q", tc.in, host, port, err, tc.bad)
			}
			continue
		}
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("%q: got %q %d, %v; want %q %d", tc.in, host, port, err, tc.host, tc.port)
		}
	}
	for _, cmd := range []string{"check", "probe"} {
		code, _, errOut := runCLI(t, cmd, "good:27441.nc.test:27441")
		if code != ExitUsage || !strings.Contains(errOut, `"good:27441.nc.test:27441" has more than one colon`) || !strings.Contains(errOut, "[2001:db8::1]:443") {
			t.Errorf("%s good:27441.nc.test:27441: exit %d, %q", cmd, code, errOut)
		}
	}
}
