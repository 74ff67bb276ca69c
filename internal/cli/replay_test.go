package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplayFlows(t *testing.T) {
	td := filepath.Join("..", "replay", "testdata")
	dir := t.TempDir()
	// The conn.log gzipped, as Zeek rotates it.
	raw, err := os.ReadFile(filepath.Join(td, "conn.log"))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	connGz := filepath.Join(dir, "conn.log.gz")
	if err := os.WriteFile(connGz, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(dir, "flows.jsonl")

	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	args := []string{"replay", "flows", "--port", "443,8443", "--zeek-ssl", filepath.Join(td, "ssl.json"), "--out", outFile, "--json", connGz}
	if code := Main(context.Background(), env, args); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var sum replayFlowsSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	if sum.Format != "zeek" || sum.Read != 6 || sum.Kept != 4 || sum.Named != 2 || sum.Malformed != 1 {
		t.Fatalf("summary %+v", sum)
	}
	written, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(written)), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], `"sni":"example.com"`) || !strings.Contains(lines[3], `"sni":"www.example.org"`) {
		t.Fatalf("flows written:\n%s", written)
	}

	// The written flows read back through auto-detection, to stdout.
	out.Reset()
	errb.Reset()
	if code := Main(context.Background(), env, []string{"replay", "flows", outFile}); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if out.String() != string(written) {
		t.Fatalf("JSON lines did not round-trip:\n%s\nvs\n%s", out.String(), written)
	}
	if want := "jsonl: 4 flows read, 4 kept, 2 named by SNI, 0 malformed"; !strings.Contains(errb.String(), want) {
		t.Fatalf("stderr %q, want %q", errb.String(), want)
	}

	// nfdump, default port, text summary with the first malformed line.
	out.Reset()
	errb.Reset()
	if code := Main(context.Background(), env, []string{"replay", "flows", filepath.Join(td, "nfdump-1.6.csv")}); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Fatalf("%d nfdump flows, want 2:\n%s", n, out.String())
	}
	if !strings.Contains(errb.String(), "nfdump: 6 flows read, 2 kept, 0 named by SNI, 1 malformed") ||
		!strings.Contains(errb.String(), "first malformed record: line 8: sa:") {
		t.Fatalf("stderr %q", errb.String())
	}
}

func TestReplayFlowsErrors(t *testing.T) {
	td := filepath.Join("..", "replay", "testdata")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"replay", "flows"}, "want one TRACE"},
		{[]string{"replay", "flows", "--format", "netflow", "x"}, `--format "netflow"`},
		{[]string{"replay", "flows", "--port", "443,http", "x"}, `--port "443,http"`},
		{[]string{"replay", "flows", "--zeek-ssl", filepath.Join(td, "ssl.log"), filepath.Join(td, "nfdump-1.6.csv")}, "--zeek-ssl goes with a Zeek conn.log"},
		{[]string{"replay", "flows", filepath.Join(td, "nope")}, "no such file"},
		{[]string{"replay", "flows", "--format", "pcap", filepath.Join(td, "conn.log")}, "pcap"},
		{[]string{"replay", "frobnicate"}, `unknown subcommand "frobnicate"`},
	} {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		if code := Main(context.Background(), env, tc.args); code != ExitUsage || !strings.Contains(errb.String(), tc.msg) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want one line with %q", tc.args, code, errb.String(), tc.msg)
		}
	}
}

func TestReplayFlowsStdinAndInterrupt(t *testing.T) {
	td := filepath.Join("..", "replay", "testdata")
	raw, err := os.ReadFile(filepath.Join(td, "nfdump-1.7-csv-fast.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	env := &Env{Stdin: bytes.NewReader(raw), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	if code := Main(context.Background(), env, []string{"replay", "flows", "-", "--json"}); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// Flows alone on stdout, the JSON summary on stderr.
	if n := strings.Count(out.String(), "\n"); n != 2 || !strings.Contains(out.String(), `"server":"198.51.100.7"`) {
		t.Fatalf("stdout:\n%s", out.String())
	}
	var sum replayFlowsSummary
	if err := json.Unmarshal(errb.Bytes(), &sum); err != nil || sum.Format != "nfdump" || sum.Read != 4 || sum.Kept != 2 {
		t.Fatalf("summary %q (%v)", errb.String(), err)
	}

	// A cancelled context (Ctrl-C) stops the read, says so, and still
	// reports what was done.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out.Reset()
	errb.Reset()
	env.Stdin = &cancelAfterRead{r: bytes.NewReader(raw), cancel: cancel}
	if code := Main(ctx, env, []string{"replay", "flows", "-"}); code != ExitUsage {
		t.Fatalf("exit %d, want %d", code, ExitUsage)
	}
	if !strings.Contains(errb.String(), "0 flows read, 0 kept") || !strings.Contains(errb.String(), "interrupted: 0 flows written") || out.Len() != 0 {
		t.Fatalf("stderr %q stdout %q", errb.String(), out.String())
	}
}

// cancelAfterRead cancels its context once its first bytes are read: a
// Ctrl-C arriving once the trace is open.
type cancelAfterRead struct {
	r      *bytes.Reader
	cancel context.CancelFunc
}

func (c *cancelAfterRead) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.cancel()
	return n, err
}
