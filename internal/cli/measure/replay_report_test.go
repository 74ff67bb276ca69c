package measure

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/replay"
	"github.com/pkie/pkie/internal/replay/report"
)

func TestReplayReport(t *testing.T) {
	td := filepath.Join("..", "..", "replay", "report", "testdata")
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

// TestReplayEndToEnd replays a schedule whose outcome is known in advance
// against a local notary and its synthetic world, then reports on it: a
// first request to each live target is a miss, the one 23 s (trace) later a
// hit, the dead target a 503.
func TestReplayEndToEnd(t *testing.T) {
	dir := t.TempDir()
	sched := filepath.Join(dir, "schedule.jsonl")
	f, err := os.Create(sched)
	if err != nil {
		t.Fatal(err)
	}
	sw, err := replay.NewScheduleWriter(f, replay.ScheduleHeader{Source: "end to end", Start: time.Unix(1_400_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	c := netip.MustParseAddr("192.0.2.1")
	for _, r := range []replay.Request{
		{T: 0, Client: c, Host: "live.test", Port: 443},
		{T: time.Second, Client: c, Host: "dead.test", Port: 443},
		{T: 2 * time.Second, Client: c, Host: "other.test", Port: 443},
		{T: 25 * time.Second, Client: netip.MustParseAddr("192.0.2.2"), Host: "live.test", Port: 443},
		{T: 26 * time.Second, Client: netip.MustParseAddr("192.0.2.3"), Host: "other.test", Port: 443},
	} {
		if err := sw.WriteRequest(r); err != nil {
			t.Fatal(err)
		}
	}
	sw.WriteTarget(replay.Target{Host: "live.test", Port: 443, Requests: 2})
	sw.WriteTarget(replay.Target{Host: "dead.test", Port: 443, Requests: 1, Dead: true})
	sw.WriteTarget(replay.Target{Host: "other.test", Port: 443, Requests: 2})
	secs := make([]replay.Second, 27)
	for i := range secs {
		secs[i] = replay.Second{ClientHits: 1, HTTPSBytes: 1e6}
	}
	if err := sw.WriteSummary(replay.ScheduleSummary{Requests: 5, Targets: 3, DeadTargets: 1, ClientCacheHits: 27, HTTPSBytes: 27e6, Seconds: secs}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	rec := filepath.Join(dir, "run.jsonl")
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	if code := Main(context.Background(), env, []string{"replay", "run", sched, "--notary", "local", "--out", rec, "--speedup", "10", "--quiet"}); code != ExitOK {
		t.Fatalf("run: exit %d: %s", code, errb.String())
	}
	out.Reset()
	if code := Main(context.Background(), env, []string{"replay", "report", "--json", rec}); code != ExitOK {
		t.Fatalf("report: exit %d: %s", code, errb.String())
	}
	var rep report.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	n := rep.Notaries[0]
	t1 := map[string]int64{}
	for _, r := range n.Outcomes.Rows {
		t1[r.Key] = r.Count
	}
	if n.Outcomes.Total != 5 || t1["ok"] != 4 || t1["unavailable"] != 1 || t1["unavailable_target"] != 1 {
		t.Fatalf("Table 1 %v", t1)
	}
	t2 := map[string]int64{}
	for _, r := range n.Cache.Rows {
		t2[r.Key] = r.Count
	}
	if t2["client"] != 27 || t2["notary"] != 2 || t2["miss"] != 2 || t2["unknown"] != 0 {
		t.Fatalf("Table 2 %v", t2)
	}
	// Ratios: second 0 0/1, second 2 0/1, seconds 25 and 26 1/1.
	for _, l := range n.Utilisation {
		if !l.Reached || *l.Seconds != 25 {
			t.Errorf("Table 3 %+v, want 25 s", l)
		}
	}
	if rep.Targets.UnavailableDead != 1 || rep.Window.Seconds != 27 {
		t.Errorf("targets %+v window %+v", rep.Targets, rep.Window)
	}
	if o := rep.Overhead; !o.Measured || o.NotaryBytes <= 0 || o.ProbeBytes <= 0 || o.HTTPSBytes != 27e6 || o.Percent <= 0 || o.Where != "listener" {
		t.Errorf("overhead %+v", o)
	}
	if d := n.Delay; !d.Defined || d.PMiss != 2.0/31 || d.Measured.MissMS <= 0 {
		t.Errorf("expected delay %+v", d)
	}
}
