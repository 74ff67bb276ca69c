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
	"github.com/pkie/pkie/internal/replay/driver"
	"github.com/pkie/pkie/internal/testbed"
)

// writeSchedule writes a schedule file of requests to live.test and
// other.test (twice each, the second time more than 20 s of trace later),
// and dead.test.
func writeSchedule(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "schedule.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sw, err := replay.NewScheduleWriter(f, replay.ScheduleHeader{Source: "test", Start: time.Unix(1_400_000_000, 0)})
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
	for _, tg := range []replay.Target{
		{Host: "live.test", Port: 443, Requests: 2},
		{Host: "dead.test", Port: 443, Requests: 1, Dead: true},
		{Host: "other.test", Port: 443, Requests: 2},
	} {
		if err := sw.WriteTarget(tg); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.WriteSummary(replay.ScheduleSummary{Requests: 5, Targets: 3, DeadTargets: 1, Seconds: make([]replay.Second, 27)}); err != nil {
		t.Fatal(err)
	}
	return path
}

func runRecord(t *testing.T, path string) (*replay.RunHeader, *replay.RunEnd, []replay.Result) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var res []replay.Result
	h, end, err := replay.ReadRecord(f, func(r replay.Result) error { res = append(res, r); return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, end, res
}

func TestReplayRunLocal(t *testing.T) {
	dir := t.TempDir()
	sched := writeSchedule(t, dir)
	rec := filepath.Join(dir, "run.jsonl")
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	args := []string{"replay", "run", sched, "--notary", "local", "--out", rec, "--speedup", "10", "--hosts", "4", "--json"}
	if code := Main(context.Background(), env, args); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var sum replayRunSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("%q: %v", out.String(), err)
	}
	if sum.Results != 5 || sum.Counts[replay.OutcomeOK] != 4 || sum.Counts[replay.OutcomeUnavailable] != 1 || sum.End.Interrupted {
		t.Fatalf("summary %+v", sum)
	}
	h, end, res := runRecord(t, rec)
	if end == nil || h.API != "convergence" || h.Speedup != 10 || !strings.Contains(h.Local, "1 dead") || len(h.Notaries) != 1 {
		t.Fatalf("header %+v end %+v", h, end)
	}
	cache := map[int64]string{}
	for _, r := range res {
		cache[r.Seq] = r.Outcome + "/" + r.Cache
	}
	want := map[int64]string{0: "ok/miss", 1: "unavailable/", 2: "ok/miss", 3: "ok/hit", 4: "ok/hit"}
	for k, v := range want {
		if cache[k] != v {
			t.Errorf("seq %d: %s, want %s", k, cache[k], v)
		}
	}
}

// TestReplayRunRemote replays over v1 against a notary given by its bundle
// file, whose targets' certificates the replayer is not told: it asks
// without a fingerprint first, then about the certificate the notary
// reported.
func TestReplayRunRemote(t *testing.T) {
	dir := t.TempDir()
	sched := writeSchedule(t, dir)
	w, err := testbed.StartWorld(testbed.WorldOptions{Dead: func(h string) bool { return h == "dead.test" }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l, err := driver.StartLocal(driver.LocalOptions{Name: "remote", Lookup: w.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	raw, err := l.Bundle.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "remote.notary")
	if err := os.WriteFile(bundle, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "run.jsonl")
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	args := []string{"replay", "run", sched, "--notary-bundle", bundle, "--api", "v1", "--out", rec, "--speedup", "10", "--from", "1s", "--quiet"}
	if code := Main(context.Background(), env, args); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	h, end, res := runRecord(t, rec)
	if end == nil || h.Local != "" || h.From != time.Second || h.Notaries[0] != "remote" {
		t.Fatalf("header %+v end %+v", h, end)
	}
	got := map[int64]string{}
	for _, r := range res {
		got[r.Seq] = r.Outcome + "/" + r.Cache
	}
	// --from 1s skips seq 0, so live.test is first asked at seq 3 (a
	// miss). other.test is asked without a fingerprint at seq 2 (the
	// notary must probe) and about the one it reported at seq 4 (a hit).
	want := map[int64]string{1: "unavailable/", 2: "ok/miss", 3: "ok/miss", 4: "ok/hit"}
	if len(got) != len(want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("seq %d: %s, want %s", k, got[k], v)
		}
	}
	if !strings.Contains(errb.String(), "4 results") {
		t.Errorf("stderr: %s", errb.String())
	}
}

func TestReplayRunUsage(t *testing.T) {
	dir := t.TempDir()
	sched := writeSchedule(t, dir)
	rec := filepath.Join(dir, "run.jsonl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{sched, "--notary", "local"}, "--out"},
		{[]string{sched, "--out", rec}, "--notary local or"},
		{[]string{sched, "--out", rec, "--notary", "remote"}, "only in-process"},
		{[]string{sched, "--out", rec, "--notary", "local", "--api", "x"}, "--api"},
		{[]string{"-", "--out", rec, "--notary", "local"}, "read twice"},
		{[]string{sched, "--out", rec, "--notary", "local", "--from", "5s", "--until", "2s"}, "--until"},
		{[]string{sched, "--out", rec, "--notary", "local", "--dead", "gone"}, "--dead"},
	} {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		if code := Main(context.Background(), env, append([]string{"replay", "run"}, tc.args...)); code != ExitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want usage error naming %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// TestReplayRunSpeedup: a speed-up that is not a finite number above 0 is a
// usage error before anything is written: no record is left behind.
func TestReplayRunSpeedup(t *testing.T) {
	dir := t.TempDir()
	sched := writeSchedule(t, dir)
	rec := filepath.Join(dir, "run.jsonl")
	for _, v := range []string{"NaN", "Inf", "+Inf", "-Inf", "0", "-1", "nan"} {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		args := []string{"replay", "run", sched, "--notary", "local", "--until", "1s", "--quiet", "--out", rec, "--speedup", v}
		code := Main(context.Background(), env, args)
		if code != ExitUsage || !strings.Contains(errb.String(), "--speedup") || !strings.Contains(errb.String(), "finite number above 0") {
			t.Errorf("--speedup %s: exit %d, %q; want a usage error naming --speedup", v, code, errb.String())
		}
		if _, err := os.Stat(rec); !os.IsNotExist(err) {
			t.Fatalf("--speedup %s left %s behind (%v)", v, rec, err)
		}
	}
}

// TestReplayRunOutSafe: --out never overwrites the schedule or a bundle
// (by its path or through another name, even with --force), and overwrites
// an existing record only with --force.
func TestReplayRunOutSafe(t *testing.T) {
	dir := t.TempDir()
	sched := writeSchedule(t, dir)
	orig, err := os.ReadFile(sched)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(sched, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.jsonl")
	if err := os.Link(sched, hard); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "b.notary")
	if err := os.WriteFile(bundle, []byte("not read"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "old.jsonl")
	if err := os.WriteFile(old, []byte("an earlier record\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		code := Main(context.Background(), env, append([]string{"replay", "run", "--quiet", "--speedup", "10", "--until", "1s"}, args...))
		return code, errb.String()
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{sched, "--notary", "local", "--out", sched}, "an input of the run"},
		{[]string{sched, "--notary", "local", "--out", sched, "--force"}, "an input of the run"},
		{[]string{sched, "--notary", "local", "--out", link, "--force"}, "an input of the run"},
		{[]string{link, "--notary", "local", "--out", hard, "--force"}, "an input of the run"},
		{[]string{sched, "--notary-bundle", bundle, "--out", bundle, "--force"}, "an input of the run"},
		{[]string{sched, "--notary", "local", "--out", old}, "--force"},
		{[]string{sched, "--notary", "local", "--out", dir, "--force"}, "directory"},
	} {
		if code, msg := run(tc.args...); code != ExitUsage || !strings.Contains(msg, tc.want) {
			t.Errorf("%v: exit %d, %q; want a usage error saying %q", tc.args, code, msg, tc.want)
		}
	}
	if b, err := os.ReadFile(sched); err != nil || !bytes.Equal(b, orig) {
		t.Fatalf("the schedule changed (%v)", err)
	}
	if b, _ := os.ReadFile(old); string(b) != "an earlier record\n" {
		t.Fatalf("the earlier record was overwritten without --force: %q", b)
	}
	if code, msg := run(sched, "--notary", "local", "--out", old, "--force"); code != ExitOK {
		t.Fatalf("--force: exit %d: %s", code, msg)
	}
	if _, end, res := runRecord(t, old); end == nil || len(res) != 1 {
		t.Fatalf("record written over the old one: end %+v, %d results; want 1", end, len(res))
	}
}

// TestReplayRunLateWarning: the progress line shows the recorded lag, and
// a replayer falling behind by a trace second is warned about even with
// --quiet, at most every lateWarnEvery.
func TestReplayRunLateWarning(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		var b bytes.Buffer
		rp := &runProgress{w: &b, quiet: quiet}
		step := func(wall time.Duration, late int64) string {
			b.Reset()
			rp.show(driver.Progress{Wall: wall, Interval: time.Second, Lag: time.Millisecond,
				RecentMaxLag: 1500 * time.Millisecond, MaxLag: 2 * time.Second, Late: late, TraceSecond: 100 * time.Millisecond})
			return b.String()
		}
		const warn = "the replayer is falling behind"
		if s := step(time.Second, 0); strings.Contains(s, warn) || quiet != (s == "") {
			t.Errorf("quiet %v, none late: %q", quiet, s)
		}
		s := step(2*time.Second, 3)
		if !strings.Contains(s, warn) || !strings.Contains(s, "not a faithful replay") || !strings.Contains(s, "3 results") {
			t.Errorf("quiet %v, 3 late: %q; want the warning", quiet, s)
		}
		if !quiet && !strings.Contains(s, "lag 1.5s (max 2s)") {
			t.Errorf("progress line %q does not show the recorded lags", s)
		}
		if s := step(5*time.Second, 9); strings.Contains(s, warn) {
			t.Errorf("quiet %v: warned again within %v: %q", quiet, lateWarnEvery, s)
		}
		if s := step(12*time.Second, 9); !strings.Contains(s, warn) || !strings.Contains(s, "9 results") {
			t.Errorf("quiet %v: not warned again after %v: %q", quiet, lateWarnEvery, s)
		}
	}
}
