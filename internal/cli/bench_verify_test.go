package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/verify"
	"github.com/pkie/pkie/internal/verify/verifytest"
)

// TestBenchVerifyJSON runs pkie bench verify tiny and checks the report:
// every phase summarized for every back end that ran, each over the
// number of verifications asked, every verdict ok, and every connection
// (with verification or without) at least the proxy's round trip, which a
// TLS handshake through it cannot beat.
func TestBenchVerifyJSON(t *testing.T) {
	const rtt = 10 * time.Millisecond
	dirs := verifytest.Dirs()
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	plots := t.TempDir()
	code := Main(context.Background(), env, []string{"bench", "verify", "--sites", "google,washingtonpost", "--shapes", "p256-3",
		"--n", "3", "--conns", "2", "--rtt", rtt.String(), "--verifier-dir", dirs[len(dirs)-1], "--out", plots, "--json"})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r struct {
		N        int
		RTT      time.Duration `json:"rtt_ns"`
		RootCnt  int           `json:"root_count"`
		Backends []struct{ Name string }
		Missing  []verify.Missing
		Sites    []struct {
			Site    string
			Sent    int
			Connect map[string]time.Duration
			Methods []map[string]json.RawMessage
		}
		Shapes []struct {
			Links              int
			SignaturesSerial   map[string]time.Duration `json:"signatures_serial"`
			SignaturesParallel map[string]time.Duration `json:"signatures_parallel"`
			Methods            []map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	if r.N != 3 || r.RTT != rtt || r.RootCnt < 100 {
		t.Errorf("n %d, rtt %v, %d roots: want 3, %v, a real store (100+)", r.N, r.RTT, r.RootCnt, rtt)
	}
	ran := map[string]bool{}
	for _, b := range r.Backends {
		ran[b.Name] = true
	}
	if !ran["go"] || !ran["go-parallel"] || len(r.Backends)+len(r.Missing) != len(verify.Names) {
		t.Fatalf("back ends %v, missing %v: want go and go-parallel at least, every one accounted for", r.Backends, r.Missing)
	}
	if os.Getenv("PKIE_REQUIRE_VERIFIERS") == "1" && len(r.Missing) > 0 {
		t.Fatalf("missing %v", r.Missing)
	}
	checkMethods := func(where string, methods []map[string]json.RawMessage, site bool) {
		t.Helper()
		if len(methods) != len(r.Backends) {
			t.Fatalf("%s: %d methods for %d back ends", where, len(methods), len(r.Backends))
		}
		for i, m := range methods {
			var name, code string
			json.Unmarshal(m["backend"], &name)
			json.Unmarshal(m["code"], &code)
			if name != r.Backends[i].Name || code != "ok" || string(m["valid"]) != "true" {
				t.Errorf("%s: method %d: %s, code %q, valid %s: want %s, ok", where, i, name, code, m["valid"], r.Backends[i].Name)
			}
			var ph map[string]map[string]time.Duration
			if err := json.Unmarshal(m["phases"], &ph); err != nil {
				t.Fatalf("%s %s: phases: %v", where, name, err)
			}
			want := []string{"roots", "chain", "verify", "hostname", "total", "round_trip"}
			if name == "go-parallel" {
				want = append(want, "parallel")
			}
			for _, p := range want {
				s, ok := ph[p]
				if !ok || s["n"] != 3 {
					t.Errorf("%s %s: phase %s = %v, want 3 samples", where, name, p, s)
					continue
				}
				if !(s["min_ns"] <= s["p50_ns"] && s["p50_ns"] <= s["p99_ns"] && s["p99_ns"] <= s["max_ns"]) {
					t.Errorf("%s %s: phase %s out of order: %v", where, name, p, s)
				}
			}
			if ph["total"]["min_ns"] <= 0 || ph["roots"]["min_ns"] <= 0 || ph["verify"]["min_ns"] <= 0 {
				t.Errorf("%s %s: a phase measured nothing: %v", where, name, ph)
			}
			if len(ph) != len(want) {
				t.Errorf("%s %s: phases %v, want exactly %v", where, name, ph, want)
			}
			var conn map[string]time.Duration
			json.Unmarshal(m["connect"], &conn)
			if site && (conn["n"] != 2 || conn["min_ns"] < r.RTT) {
				t.Errorf("%s %s: connect %v: want 2 connections, each at least the %v RTT", where, name, conn, r.RTT)
			}
			if !site && conn != nil {
				t.Errorf("%s %s: a shape has no connection, got %v", where, name, conn)
			}
			// The Servo experiment's row for the site and the method
			// this back end stands in for; go has none, nor do shapes.
			var paper struct {
				Site       string  `json:"site"`
				Method     string  `json:"method"`
				Roots      float64 `json:"roots_creation_ms"`
				VerifyCall float64 `json:"verify_call_ms"`
				Connection float64 `json:"total_connection_ms"`
			}
			has := m["paper"] != nil
			if has {
				json.Unmarshal(m["paper"], &paper)
			}
			counterpart := map[string]string{"go-parallel": "rustls parallel", "openssl": "openssl", "webpki": "rustls serial"}[name]
			switch {
			case !site || counterpart == "":
				if has {
					t.Errorf("%s %s: paper figures %s where the experiment has none", where, name, m["paper"])
				}
			case !has || paper.Site != where || paper.Method != counterpart || paper.Roots <= 0 || paper.VerifyCall <= 0 || paper.Connection <= 0:
				t.Errorf("%s %s: paper %s, want the Servo experiment's %s row for %s", where, name, m["paper"], counterpart, where)
			}
		}
	}
	if len(r.Sites) != 2 || r.Sites[0].Site != "google" || r.Sites[1].Site != "washingtonpost" {
		t.Fatalf("sites %+v", r.Sites)
	}
	for _, s := range r.Sites {
		if s.Connect["n"] != 2 || s.Connect["min_ns"] < r.RTT {
			t.Errorf("%s: connect without verification %v: want 2, each at least the %v RTT", s.Site, s.Connect, r.RTT)
		}
		if s.Sent != 3 {
			t.Errorf("%s: %d certificates sent, want 3 (leaf, intermediate, root)", s.Site, s.Sent)
		}
		checkMethods(s.Site, s.Methods, true)
	}
	if len(r.Shapes) != 1 || r.Shapes[0].Links != 2 {
		t.Fatalf("shapes %+v", r.Shapes)
	}
	sh := r.Shapes[0]
	if sh.SignaturesSerial["n"] != 3 || sh.SignaturesParallel["n"] != 3 || sh.SignaturesSerial["min_ns"] <= 0 {
		t.Errorf("signature ceilings %v, %v", sh.SignaturesSerial, sh.SignaturesParallel)
	}
	checkMethods("p256-3", sh.Methods, false)
	for _, f := range []string{"verify-sites.svg", "verify-sites.png", "verify-connect.svg", "verify-shapes.png"} {
		if st, err := os.Stat(filepath.Join(plots, f)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", f, err)
		}
	}
	if !strings.Contains(errb.String(), "site google: 2 connections per method") {
		t.Errorf("no progress on stderr: %s", errb.String())
	}

	// --from prints the saved run as text without measuring anything.
	saved := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(saved, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	env = &Env{Stdout: &text, Stderr: &errb, Getenv: func(string) string { return "" }}
	if code := Main(context.Background(), env, []string{"bench", "verify", "--from", saved}); code != ExitOK {
		t.Fatalf("--from: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"Over the 2 sites", "washingtonpost", "none (ceiling)", "p256-3", "signatures, parallel",
		"Servo experiment", "rustls parallel: 0.327 / 0.525 / 0.532 / 6.21", "Servo experiment, of 12 sites"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("--from: no %q in\n%s", want, text.String())
		}
	}
}

// TestBenchVerifyUsage checks that bad flags are refused before anything
// runs.
func TestBenchVerifyUsage(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--sites", "myspace"},
		{"--shapes", "rsa512-2"},
		{"--backends", "go,nss"},
		{"--n", "0"},
		{"--sites", "none", "--shapes", "none"},
		{"--roots", "/nonexistent.pem"},
		{"--out", filepath.Join(notDir, "plots")}, // cannot be created
		{"--rtt", "-1ms"},
		{"extra"},
	} {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a check that is missing fails instead of running the bench
		if code := Main(ctx, env, append([]string{"bench", "verify"}, args...)); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (usage); stderr %s", args, code, ExitUsage, errb.String())
		}
	}
}

// TestBenchVerifyMissingHelper checks that a back end whose helper is not
// built is reported, in the JSON and on stderr, and the others still run.
func TestBenchVerifyMissingHelper(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty) // no helper anywhere
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code := Main(context.Background(), env, []string{"bench", "verify", "--sites", "none", "--shapes", "rsa2048-2",
		"--n", "2", "--backends", "openssl,go", "--verifier-dir", empty, "--json"})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r struct {
		Backends []struct{ Name string }
		Missing  []verify.Missing
		Shapes   []struct {
			Methods []struct {
				Backend string
				Code    string
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	if len(r.Missing) != 1 || r.Missing[0].Name != "openssl" || !strings.Contains(r.Missing[0].Why, "not built") {
		t.Errorf("missing %+v, want openssl not built", r.Missing)
	}
	if len(r.Backends) != 1 || r.Backends[0].Name != "go" || len(r.Shapes) != 1 || len(r.Shapes[0].Methods) != 1 ||
		r.Shapes[0].Methods[0].Backend != "go" || r.Shapes[0].Methods[0].Code != "ok" {
		t.Errorf("back ends %+v, shapes %+v: want go alone, ok", r.Backends, r.Shapes)
	}
	if !strings.Contains(errb.String(), "back end openssl missing: not built") {
		t.Errorf("stderr does not report the missing helper: %s", errb.String())
	}
}
