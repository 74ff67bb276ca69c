package client

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/scan"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/internal/verify"
)

func runCorpusCLI(t *testing.T, args ...string) (error, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	err := runVerifyCorpus(t.Context(), env, args)
	return err, out.String(), errb.String()
}

func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *command.ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitUsage
}

func TestVerifyCorpusKnownJSON(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "agreement.svg")
	err, out, errs := runCorpusCLI(t, "--corpus", "known", "--backends", "go,go-parallel", "--json", "--plot", plot, "--strict")
	if err != nil {
		t.Fatalf("%v\n%s", err, errs)
	}
	var rep struct {
		Corpora  []string `json:"corpora"`
		Cases    int      `json:"cases"`
		Backends []struct {
			Name  string `json:"name"`
			Total struct {
				Cases, Agree, Disagree, Errors, Accepted int
			} `json:"total"`
		} `json:"backends"`
		Pairs []struct {
			Compared    int `json:"compared"`
			SameVerdict int `json:"same_verdict"`
		} `json:"pairs"`
		Disagreements []json.RawMessage `json:"disagreements"`
		Unexplained   int               `json:"unexplained"`
		Missing       []json.RawMessage `json:"missing"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Cases != 15 || len(rep.Corpora) != 1 || rep.Corpora[0] != "known" || len(rep.Backends) != 2 || len(rep.Missing) != 0 {
		t.Fatalf("report %+v", rep)
	}
	for _, b := range rep.Backends {
		if b.Total.Cases != 15 || b.Total.Disagree != 0 || b.Total.Errors != 0 || b.Total.Accepted != 4 {
			t.Errorf("%s: %+v", b.Name, b.Total)
		}
	}
	if len(rep.Pairs) != 1 || rep.Pairs[0].SameVerdict != 15 || len(rep.Disagreements) != 0 || rep.Unexplained != 0 {
		t.Errorf("pairs %+v, %d disagreements", rep.Pairs, len(rep.Disagreements))
	}
	if !strings.Contains(errs, "15/15 cases") {
		t.Errorf("no progress on stderr: %q", errs)
	}
	svg, err := os.ReadFile(plot)
	if err != nil || !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("go-parallel")) {
		t.Errorf("plot: %v, %d bytes", err, len(svg))
	}
}

// TestVerifyCorpusScanAndStrict runs a scan file of testbed sites, one of
// them with an expired leaf the back ends all reject: agreement without
// expectation. The text report names the sources; --strict passes.
func TestVerifyCorpusScanAndStrict(t *testing.T) {
	dir := t.TempDir()
	root, err := testbed.NewRootCA("corpus cli root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("corpus cli intermediate", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := inter.Issue(testbed.LeafOptions{DNSNames: []string{"good.test"}})
	old, _ := inter.Issue(testbed.LeafOptions{DNSNames: []string{"old.test"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	var lines bytes.Buffer
	for _, r := range []scan.Record{
		{Rank: 1, Domain: "good.test", Chain: good.Chain, Time: time.Now()},
		{Rank: 2, Domain: "old.test", Chain: old.Chain, Time: time.Now()},
		{Rank: 3, Domain: "down.test", Error: "dial: connection refused", Time: time.Now()},
	} {
		b, _ := json.Marshal(r)
		lines.Write(append(b, '\n'))
	}
	scanFile := filepath.Join(dir, "scan.jsonl")
	rootsFile := filepath.Join(dir, "roots.pem")
	os.WriteFile(scanFile, lines.Bytes(), 0o644)
	os.WriteFile(rootsFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Cert.Raw}), 0o644)

	err, out, errs := runCorpusCLI(t, "--corpus", "scan:"+scanFile, "--roots", rootsFile, "--backends", "go,go-parallel", "--strict", "--show", "-1")
	if err != nil {
		t.Fatalf("%v\n%s", err, errs)
	}
	for _, want := range []string{"2 cases, scan 2; 1 skipped", "go           scan", "no chain: dial", "same verdict"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestVerifyCorpusUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--corpus", ""},
		{"--corpus", "nosuch"},
		{"--corpus", "limbo"},
		{"--corpus", "limbo:/nonexistent/limbo.json"},
		{"--corpus", "known", "--backends", "go,nosuch"},
		{"--corpus", "known", "--plot", "x.gif"},
		{"--corpus", "known", "--workers", "0"},
		{"--corpus", "known", "extra"},
	} {
		err, _, _ := runCorpusCLI(t, args...)
		if exitCode(err) != ExitUsage {
			t.Errorf("%q: exit %d (%v), want %d", args, exitCode(err), err, ExitUsage)
		}
	}
	if !hasArg([]string{"x.pem", "--corpus=known"}, "--corpus") || !hasArg([]string{"-corpus", "known"}, "--corpus") || hasArg([]string{"--", "--corpus"}, "--corpus") || hasArg([]string{"--corpusx"}, "--corpus") {
		t.Error("hasArg")
	}
}

// TestVerifyDispatchesCorpus: "pkie verify --corpus" is the corpus run,
// through Main, with its exit codes.
func TestVerifyDispatchesCorpus(t *testing.T) {
	code, out, errs := runCLI(t, "verify", "--backends", "go", "--corpus=known", "--json")
	if code != ExitOK || !strings.Contains(out, `"corpora": [`) || !strings.Contains(out, `"unexplained": 0`) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if code, _, _ := runCLI(t, "verify", "--corpus", "nosuch"); code != ExitUsage {
		t.Errorf("unknown corpus: exit %d, want %d", code, ExitUsage)
	}
}

// TestVerifyCorpusStrictFails: a case whose expectation a back end does
// not meet, and no known difference explains, exits 1 with --strict and 0
// without.
func TestVerifyCorpusStrictFails(t *testing.T) {
	data, err := os.ReadFile("../../verify/corpus/testdata/limbo-fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Replace(data, []byte(`"expected_result": "SUCCESS"`), []byte(`"expected_result": "FAILURE"`), 1)
	if bytes.Equal(flipped, data) {
		t.Fatal("fixture has no SUCCESS case")
	}
	file := filepath.Join(t.TempDir(), "limbo.json")
	os.WriteFile(file, flipped, 0o644)
	if code, out, errs := runCLI(t, "verify", "--corpus", "limbo:"+file, "--backends", "go"); code != ExitOK || !strings.Contains(out, "unexplained (not soft): 1") {
		t.Errorf("without --strict: exit %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "verify", "--corpus", "limbo:"+file, "--backends", "go", "--strict"); code != ExitNegative || !strings.Contains(errs, "1 unexplained") {
		t.Errorf("--strict: exit %d, want %d\n%s", code, ExitNegative, errs)
	}
}

// TestVerifyCorpusStrictBrokenHelper: a helper that is built but will not
// start fails a --strict run, where one not built is only reported.
func TestVerifyCorpusStrictBrokenHelper(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh for the test helper")
	}
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	script := "#!/bin/sh\necho 'cannot load libjansson.so.4' >&2\nexit 127\n"
	if err := os.WriteFile(filepath.Join(dir, verify.HelperProgram("openssl")), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "verify", "--corpus", "known", "--backends", "go,openssl", "--verifier-dir", dir, "--strict")
	if code != ExitNegative || !strings.Contains(errs, "1 back ends built but not started") || !strings.Contains(errs, "libjansson.so.4") {
		t.Errorf("exit %d, want %d\n%s", code, ExitNegative, errs)
	}
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	if code, _, errs := runCLI(t, "verify", "--corpus", "known", "--backends", "go,openssl", "--verifier-dir", empty, "--strict"); code != ExitOK {
		t.Errorf("a helper not built: exit %d, want 0\n%s", code, errs)
	}
}
