package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/replay/report"
)

func TestReplayReport(t *testing.T) {
	td := filepath.Join("..", "replay", "report", "testdata")
	dir := t.TempDir()
	for _, f := range []string{"record.jsonl", "schedule.jsonl"} {
		b, err := os.ReadFile(filepath.Join(td, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	record := filepath.Join(dir, "record.jsonl")
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		code := Main(context.Background(), env, append([]string{"replay", "report"}, args...))
		return code, out.String(), errb.String()
	}

	// Text, the schedule found beside the record by the name it gives.
	code, out, errs := run(record)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Table 1: every request by outcome", "Table 3:", "= 259.7 ms (§5 states 260 ms)", "overhead 0.2100%"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// JSON with plots, the schedule named.
	plots := filepath.Join(dir, "plots")
	code, out, errs = run("--json", "--plots", plots, "--local-cost", "108ms", "--schedule", filepath.Join(td, "schedule.jsonl"), record)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		report.Report
		Plots []string `json:"plots"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	n := got.Notaries[0]
	if n.Outcomes.Total != 28 || n.Cache.Total != 44 || len(got.Plots) != 8 || n.Delay.Measured.ClientMS != 108 {
		t.Fatalf("JSON report: outcomes %d, cache %d, plots %v, delay %+v", n.Outcomes.Total, n.Cache.Total, got.Plots, n.Delay)
	}
	for _, f := range got.Plots {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("plot %s: %v", f, err)
		}
	}

	// No schedule to be found: the error says how to give it.
	lone := filepath.Join(t.TempDir(), "record.jsonl")
	b, _ := os.ReadFile(record)
	os.WriteFile(lone, b, 0o644)
	if code, _, errs := run(lone); code == ExitOK || !strings.Contains(errs, "--schedule") {
		t.Fatalf("without a schedule: exit %d, %q", code, errs)
	}

	// Another schedule than the one replayed is refused.
	other := strings.Replace(string(mustRead(t, filepath.Join(td, "schedule.jsonl"))), "hand-written fixture", "another trace", 1)
	otherPath := filepath.Join(dir, "other.jsonl")
	os.WriteFile(otherPath, []byte(other), 0o644)
	if code, _, errs := run("--schedule", otherPath, record); code == ExitOK || !strings.Contains(errs, "is not the one the run replayed") {
		t.Fatalf("another schedule: exit %d, %q", code, errs)
	}

	if code, _, _ := run(); code != ExitUsage {
		t.Fatalf("no record: exit %d, want usage", code)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
