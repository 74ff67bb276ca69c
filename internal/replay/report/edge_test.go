package report

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

func TestUtilisation(t *testing.T) {
	// s builds one second: hits of successful (0 of 0: no successful
	// request, the second has no ratio).
	s := func(hit, succ int64) counts {
		var c counts
		c.rows[rowOK] = succ
		c.hit = hit
		return c
	}
	never := map[int]int64{}
	for _, tc := range []struct {
		name   string
		secs   []counts
		lo, hi int
		want   map[int]int64 // level → seconds; absent: never
	}{
		{"climbs", []counts{s(0, 2), s(2, 3), s(3, 4), s(3, 4), s(2, 2), s(2, 2)}, 0, 6,
			map[int]int64{65: 1, 70: 2, 75: 2, 80: 4, 85: 4, 90: 4, 95: 4, 99: 4}},
		{"dips in the last second", []counts{s(10, 10), s(10, 10), s(10, 10), s(1, 2)}, 0, 4, never},
		{"dips late, recovers", []counts{s(9, 10), s(10, 10), s(7, 10), s(10, 10), s(10, 10)}, 0, 5,
			map[int]int64{65: 0, 70: 0, 75: 3, 80: 3, 85: 3, 90: 3, 95: 3, 99: 3}},
		{"no successful request", []counts{s(0, 0), s(0, 0)}, 0, 2, never},
		{"no seconds", nil, 0, 0, never},
		{"seconds without successes neither hold nor break", []counts{s(0, 1), s(9, 10), s(0, 0), s(0, 0), s(19, 20)}, 0, 5,
			map[int]int64{65: 1, 70: 1, 75: 1, 80: 1, 85: 1, 90: 1, 95: 4}},
		{"exactly at the level counts", []counts{s(13, 20), s(7, 10)}, 0, 2, map[int]int64{65: 0, 70: 1}},
		{"window from second 2: times count from it, earlier seconds ignored", []counts{s(0, 5), s(0, 5), s(8, 10), s(10, 10), s(0, 9)}, 2, 4,
			map[int]int64{65: 0, 70: 0, 75: 0, 80: 0, 85: 1, 90: 1, 95: 1, 99: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := utilisation(tc.secs, tc.lo, tc.hi)
			if len(got) != len(Levels) {
				t.Fatalf("%d levels", len(got))
			}
			for _, l := range got {
				want, ok := tc.want[l.Percent]
				if l.Reached != ok || (ok && (*l.Seconds != want || *l.TraceSecond != want+int64(tc.lo))) || (!ok && (l.Seconds != nil || l.TraceSecond != nil)) {
					t.Errorf("%d%%: %+v, want reached %v at %d s", l.Percent, l, ok, want)
				}
			}
		})
	}
}

// run is a small run written through the real writers.
type run struct {
	header  replay.RunHeader
	results []replay.Result
	nets    []replay.NetSample
	end     *replay.RunEnd
	seconds []replay.Second
	targets []replay.Target
}

var t0 = time.Date(2013, 4, 21, 12, 0, 0, 0, time.UTC)

func (r *run) files(t *testing.T) ([]byte, []byte) {
	t.Helper()
	var sched bytes.Buffer
	sh := replay.ScheduleHeader{Source: "edge", Start: t0}
	sw, err := replay.NewScheduleWriter(&sched, sh)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range r.targets {
		sw.WriteTarget(tg)
	}
	var reqs int64
	for _, s := range r.seconds {
		reqs += s.Requests
	}
	if err := sw.WriteSummary(replay.ScheduleSummary{Requests: reqs, Seconds: r.seconds}); err != nil {
		t.Fatal(err)
	}
	h := r.header
	h.ScheduleHeader = sh
	h.ScheduleHeader.Type, h.ScheduleHeader.Version = replay.TypeHeader, replay.ScheduleVersion
	if h.Speedup == 0 {
		h.Speedup = 1
	}
	if h.Timeout == 0 {
		h.Timeout = 10 * time.Second
	}
	if h.Notaries == nil {
		h.Notaries = []string{"n0"}
	}
	var rec bytes.Buffer
	rw, err := replay.NewRecordWriter(&rec, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range r.results {
		rw.WriteResult(res)
	}
	for _, n := range r.nets {
		rw.WriteNet(n)
	}
	if r.end != nil {
		rw.WriteEnd(*r.end)
	} else {
		rw.Flush()
	}
	return rec.Bytes(), sched.Bytes()
}

func (r *run) build(t *testing.T) (*Report, error) {
	rec, sched := r.files(t)
	return Build(bytes.NewReader(rec), func(*replay.RunHeader) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(sched)), nil
	}, Options{})
}

func ok(n int, tt time.Duration, cache string) replay.Result {
	return replay.Result{Notary: n, T: tt, Sent: tt, Latency: 10 * time.Millisecond, Host: "a.example", Port: 443,
		Outcome: replay.OutcomeOK, Status: 200, Cache: cache}
}

func hasWarning(rep *Report, s string) bool {
	for _, w := range rep.Warnings {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

func TestKilledRecord(t *testing.T) {
	// Killed in its third second of ten: no end, the window stops at the
	// last request recorded, and client hits and HTTPS bytes count only
	// the seconds replayed.
	r := &run{seconds: make([]replay.Second, 10)}
	for i := range r.seconds {
		r.seconds[i] = replay.Second{ClientHits: 1, Requests: 1, HTTPSBytes: 100}
	}
	r.results = []replay.Result{ok(0, 0, replay.CacheMiss), ok(0, time.Second, replay.CacheHit), ok(0, 2500*time.Millisecond, replay.CacheHit)}
	r.nets = []replay.NetSample{{Wall: time.Second, NotaryBytes: 10}, {Wall: 2 * time.Second, NotaryBytes: 40}}
	rep, err := r.build(t)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run.Ended || rep.Window != (Window{0, 3, 3}) || !hasWarning(rep, "no end: the run was killed") {
		t.Fatalf("run %+v window %+v warnings %q", rep.Run, rep.Window, rep.Warnings)
	}
	if c := rows(rep.Notaries[0].Cache.Rows); c["client"] != 3 || c["notary"] != 2 || c["miss"] != 1 {
		t.Fatalf("Table 2 %v", c)
	}
	if o := rep.Overhead; o.HTTPSBytes != 300 || o.NotaryBytes != 40 || !near(o.Percent, 100*40.0/300) {
		t.Fatalf("overhead %+v", o)
	}

	// Interrupted at 4.2 s, replayed from second 2 at 10×: the window is
	// seconds 2–4; speed-up and interruption are warned of.
	r.header = replay.RunHeader{From: 2 * time.Second, Speedup: 10}
	r.results = []replay.Result{ok(0, 2*time.Second, replay.CacheMiss), ok(0, 4*time.Second, replay.CacheHit)}
	// Sent is wall time since trace time 2 s, which runs 10× faster.
	r.results[0].Sent = 0
	r.results[1].Sent = 200 * time.Millisecond // 2 s + 10×0.2 s = 4 s: on time
	r.end = &replay.RunEnd{Interrupted: true, Reached: 4200 * time.Millisecond}
	r.nets = nil
	rep, err = r.build(t)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Window != (Window{2, 5, 3}) || !hasWarning(rep, "interrupted") || !hasWarning(rep, "10× real time") || rep.Run.MaxLag != 0 || hasWarning(rep, "behind") {
		t.Fatalf("window %+v lag %v warnings %q", rep.Window, rep.Run.MaxLag, rep.Warnings)
	}
	if len(rep.Seconds) != 3 || rep.Seconds[0].Second != 2 || rep.Seconds[0].Sent != 1 || rep.Seconds[2].Sent != 1 {
		t.Fatalf("sent by second %+v", rep.Seconds)
	}
	if l := rep.Notaries[0].Utilisation[0]; !l.Reached || *l.Seconds != 2 || *l.TraceSecond != 4 {
		t.Fatalf("Table 3 65%%: %+v", l)
	}
	if rep.Overhead.Measured || !hasWarning(rep, "no byte sample") {
		t.Fatalf("overhead without samples %+v", rep.Overhead)
	}
}

func TestSeveralNotaries(t *testing.T) {
	r := &run{header: replay.RunHeader{Notaries: []string{"n0", "n1"}}, seconds: []replay.Second{{Requests: 2}, {Requests: 1}},
		targets: []replay.Target{{Host: "a.example", Port: 443}, {Host: "dead.example", Port: 443, Dead: true}},
		end:     &replay.RunEnd{Reached: 1500 * time.Millisecond}}
	dead := replay.Result{T: 0, Host: "dead.example", Port: 443, Outcome: replay.OutcomeUnavailable, Status: 503, Error: "503: cannot connect to the target"}
	dead1 := dead
	dead1.Notary = 1
	r.results = []replay.Result{ok(0, 0, replay.CacheMiss), ok(1, 0, replay.CacheMiss), dead, dead1,
		ok(0, time.Second, replay.CacheHit), {Notary: 1, T: time.Second, Sent: time.Second, Host: "a.example", Port: 443, Outcome: replay.OutcomeTimeout, Error: "client timeout"}}
	rep, err := r.build(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Notaries) != 2 || rep.Notaries[1].Name != "n1" {
		t.Fatalf("notaries %+v", rep.Notaries)
	}
	n0, n1, tot := rows(rep.Notaries[0].Outcomes.Rows), rows(rep.Notaries[1].Outcomes.Rows), rows(rep.Total.Rows)
	if n0["ok"] != 2 || n0["unavailable_target"] != 1 || n1["ok"] != 1 || n1["timeout"] != 1 || tot["ok"] != 3 || tot["unavailable"] != 2 || rep.Total.Total != 6 {
		t.Fatalf("Table 1: %v / %v / %v", n0, n1, tot)
	}
	if c := rows(rep.Notaries[1].Cache.Rows); c["notary"] != 0 || c["miss"] != 1 {
		t.Fatalf("notary 1's Table 2 %v", c)
	}
	if rep.Targets.UnavailableDead != 2 || rep.Targets.ToDead != 2 || rep.Targets.UnavailableLive != 0 {
		t.Fatalf("targets %+v", rep.Targets)
	}
	if rep.Seconds[0].Sent != 4 || rep.Seconds[0].Scheduled != 2 {
		t.Fatalf("second 0 %+v", rep.Seconds[0])
	}
	var buf bytes.Buffer
	WriteText(&buf, rep)
	if !strings.Contains(buf.String(), "Table 1: every request by outcome, notary 1 (n1)") || !strings.Contains(buf.String(), "all 2 notaries") {
		t.Fatalf("text:\n%s", buf.String())
	}
}

func TestBadRecords(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  replay.Result
		want string
	}{
		{"notary out of range", replay.Result{Notary: 3, Outcome: replay.OutcomeOK}, "names notary 3"},
		{"negative notary", replay.Result{Notary: -1, Outcome: replay.OutcomeOK}, "names notary -1"},
		{"beyond the schedule", replay.Result{T: time.Hour, Outcome: replay.OutcomeOK}, "outside the schedule"},
		{"before the schedule", replay.Result{T: -time.Second, Outcome: replay.OutcomeOK}, "outside the schedule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &run{seconds: []replay.Second{{Requests: 1}}, results: []replay.Result{tc.res}}
			if _, err := r.build(t); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// An unknown outcome is counted apart and warned of, not dropped.
	r := &run{seconds: []replay.Second{{Requests: 1}}, results: []replay.Result{{Outcome: "teleported"}}, end: &replay.RunEnd{}}
	rep, err := r.build(t)
	if err != nil {
		t.Fatal(err)
	}
	if rows(rep.Total.Rows)["unrecognised"] != 1 || !hasWarning(rep, `"teleported"`) {
		t.Fatalf("unknown outcome: %v %q", rows(rep.Total.Rows), rep.Warnings)
	}
	// Garbage is refused with what ReadRecord says.
	if _, err := Build(strings.NewReader("hello\nworld\n"), nil, Options{}); err == nil || !strings.Contains(err.Error(), "run record line 1") {
		t.Fatalf("garbage: %v", err)
	}
	if _, err := Build(strings.NewReader(""), nil, Options{}); err == nil {
		t.Fatal("empty record accepted")
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		host, err string
		want      int
	}{
		// What pkie's notary says, as the driver records it.
		{"dead5.example", "status 503: cannot verify dead5.example:443: cannot connect to the target", rowUnavailTarget},
		{"a.example", "status 503: cannot verify a.example:443: TLS handshake with the target failed (timed out)", rowUnavailTarget},
		{"a.example", "status 503: cannot verify a.example:443: cannot resolve the target's host name", rowUnavailTarget},
		{"a.example", "status 503: cannot verify a.example:443: notary overloaded: too many probes queued for this target", rowUnavailOverload},
		{"a.example", "status 503: cannot verify a.example:443: notary overloaded: probe queue full", rowUnavailOverload},
		{"a.example", "status 503: server overloaded: too many requests in progress", rowUnavailOverload},
		{"a.example", "status 503: too many requests in progress from your address", rowUnavailOverload},
		{"a.example", "status 503: cannot verify a.example:443: timed out waiting for the probe to finish and be recorded", rowUnavailOther},
		{"a.example", "status 503: ", rowUnavailOther},
		// The target's name says nothing about why.
		{"overloaded.example", "status 503: cannot verify overloaded.example:443: cannot connect to the target", rowUnavailTarget},
		{"target.example", "status 503: cannot verify target.example:443: timed out waiting for the probe to finish and be recorded", rowUnavailOther},
	} {
		r := replay.Result{Outcome: replay.OutcomeUnavailable, Status: 503, Host: tc.host, Port: 443, Error: tc.err}
		if got := classify(&r); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.err, rowKeys[got], rowKeys[tc.want])
		}
	}
}

func TestFirstLineBounded(t *testing.T) {
	// A record with no line break is refused once past the line bound,
	// not read whole.
	huge := io.MultiReader(strings.NewReader(`{"type":"run","version":1,"schedule":"`), strings.NewReader(strings.Repeat("x", replay.MaxScheduleLine+1)))
	if _, err := Build(huge, nil, Options{}); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("a line without end: %v", err)
	}
}

// TestDeadTargetCase: a hand-made schedule may spell a host in one case in
// its requests and another in its target records; both name one target
// (replay.TargetKey), so the dead match must not depend on case.
func TestDeadTargetCase(t *testing.T) {
	r := &run{seconds: []replay.Second{{Requests: 1}},
		targets: []replay.Target{{Host: "dead.test", Port: 443, Dead: true}},
		results: []replay.Result{{T: 0, Host: "Dead.Test", Port: 443, Outcome: replay.OutcomeUnavailable, Status: 503, Error: "503: cannot connect to the target"}},
		end:     &replay.RunEnd{Reached: time.Second}}
	rep, err := r.build(t)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Targets.ToDead != 1 || rep.Targets.UnavailableDead != 1 || rep.Targets.UnavailableLive != 0 {
		t.Fatalf("targets %+v: the request to Dead.Test was not matched with dead.test", rep.Targets)
	}
}

// TestHostileLatencies is the reviewer's hostile record: three ok results
// with latency 4e18 ns and two with -5e9 ns (and one sent before the run
// started) once gave a miss mean of -9.2e9 ms and a negative expected
// delay. They are counted as malformed, warned of and left out; the rest
// are reported as if they were alone.
func TestHostileLatencies(t *testing.T) {
	mk := func(n int, cache string, lat time.Duration) replay.Result {
		r := ok(0, time.Duration(n)*100*time.Millisecond, cache)
		r.Latency = lat
		return r
	}
	r := &run{seconds: []replay.Second{{Requests: 10, ClientHits: 10}},
		header: replay.RunHeader{Timeout: 10 * time.Second},
		end:    &replay.RunEnd{Reached: time.Second, Wall: 5 * time.Second}}
	r.results = []replay.Result{mk(0, replay.CacheMiss, 800*time.Millisecond), mk(1, replay.CacheHit, 200*time.Millisecond),
		mk(2, replay.CacheMiss, 4e18), mk(3, replay.CacheMiss, 4e18), mk(4, replay.CacheHit, 4e18),
		mk(5, replay.CacheMiss, -5e9), mk(6, replay.CacheHit, -5e9),
		// Past the client's timeout, but within the wall time plus it:
		// kept.
		mk(7, replay.CacheHit, 12*time.Second),
		// Past the wall time plus the timeout: malformed.
		mk(8, replay.CacheMiss, 16*time.Second)}
	neg := mk(9, replay.CacheMiss, time.Second)
	neg.Sent = -time.Second
	r.results = append(r.results, neg)
	rep, err := r.build(t)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run.Malformed != 7 || !hasWarning(rep, "7 results are malformed") || rep.Run.Results != 3 {
		t.Fatalf("malformed %d results %d warnings %q", rep.Run.Malformed, rep.Run.Results, rep.Warnings)
	}
	n := rep.Notaries[0]
	if m := n.Latency["miss"]; m.N != 1 || !near(m.MeanMS, 800) {
		t.Errorf("miss latency %+v, want the one 800 ms", m)
	}
	if h := n.Latency["hit"]; h.N != 2 || !near(h.MeanMS, 6100) {
		t.Errorf("hit latency %+v, want 200 ms and 12 s", h)
	}
	if d := n.Delay.Measured.DelayMS; !(d > 0 && d < 16000) {
		t.Errorf("expected delay %v ms", d)
	}
	for _, m := range rep.Minutes {
		for _, v := range []*float64{m.MeanHitMS, m.MeanMissMS, m.MeanSuccessfulMS} {
			if v != nil && (*v < 0 || *v > 16000) {
				t.Errorf("minute %+v has a mean of %v ms", m, *v)
			}
		}
	}

	// Killed (no end): the bound is the latest Sent plus the timeout.
	r.end = nil
	r.results = []replay.Result{mk(0, replay.CacheMiss, 800*time.Millisecond), mk(1, replay.CacheMiss, 10100*time.Millisecond),
		mk(2, replay.CacheMiss, 10300*time.Millisecond)} // Sent 0.2 s: bound 10.2 s
	rep, err = r.build(t)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run.Malformed != 1 || rep.Notaries[0].Latency["miss"].N != 2 {
		t.Fatalf("killed: malformed %d, miss %+v", rep.Run.Malformed, rep.Notaries[0].Latency["miss"])
	}

	// Latencies that are each valid (a run whose wall time is huge) but
	// whose int64 sum overflows: the mean stays right.
	r.end = &replay.RunEnd{Reached: time.Second, Wall: 4e18}
	r.results = []replay.Result{mk(0, replay.CacheMiss, 3e18), mk(1, replay.CacheMiss, 3e18), mk(2, replay.CacheMiss, 3e18), mk(3, replay.CacheMiss, 3e18)}
	rep, err = r.build(t)
	if err != nil {
		t.Fatal(err)
	}
	if m := rep.Notaries[0].Latency["miss"]; m.N != 4 || !near(m.MeanMS, 3e12) || rep.Run.Malformed != 0 {
		t.Fatalf("huge latencies: %+v malformed %d", m, rep.Run.Malformed)
	}
	if mm := rep.Minutes[0].MeanMissMS; mm == nil || !near(*mm, 3e12) {
		t.Fatalf("minute mean %v", mm)
	}
}

// TestOverheadPerNotary: §3.5's overhead is one notary's bytes over the
// trace's HTTPS bytes. With two notaries counted apart, each has its own;
// counted together, the sum is labelled and warned of. Figure 4 averages
// the notaries' hits and misses, labelled.
func TestOverheadPerNotary(t *testing.T) {
	r := &run{header: replay.RunHeader{Notaries: []string{"n0", "n1"}},
		seconds: []replay.Second{{Requests: 2, HTTPSBytes: 1000}},
		end:     &replay.RunEnd{Reached: time.Second, Wall: time.Second},
		results: []replay.Result{ok(0, 0, replay.CacheMiss), ok(1, 0, replay.CacheMiss), ok(0, 0, replay.CacheHit), ok(1, 0, replay.CacheHit)},
		nets:    []replay.NetSample{{Wall: time.Second, NotaryBytes: 400, NotaryBytesEach: []int64{300, 100}, Where: "listener"}}}
	rep, err := r.build(t)
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Overhead
	if o.Notaries != 2 || !near(o.Percent, 40) || len(o.PerNotary) != 2 || hasWarning(rep, "together") {
		t.Fatalf("overhead %+v warnings %q", o, rep.Warnings)
	}
	if a, b := o.PerNotary[0], o.PerNotary[1]; a.Name != "n0" || !near(a.Percent, 30) || !near(a.BytesPerRequest, 150) ||
		b.Name != "n1" || !near(b.Percent, 10) || b.NotaryBytes != 100 || !near(b.BytesPerRequest, 50) {
		t.Fatalf("per notary %+v", o.PerNotary)
	}
	var buf bytes.Buffer
	WriteText(&buf, rep)
	for _, want := range []string{"all 2 notaries together", "notary 1 (n1): 100 bytes, overhead 10.0000%"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, buf.String())
		}
	}
	dir := t.TempDir()
	if _, err := WritePlots(dir, rep); err != nil {
		t.Fatal(err)
	}
	if svg, err := os.ReadFile(filepath.Join(dir, Fig4+".svg")); err != nil || !strings.Contains(string(svg), "mean of 2 notaries") {
		t.Errorf("figure 4 not labelled per notary (%v)", err)
	}

	// Only the sum: no per-notary figure, and a warning.
	r.nets[0].NotaryBytesEach = nil
	rep, err = r.build(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Overhead.PerNotary) != 0 || !hasWarning(rep, "bytes of its 2 notaries together") {
		t.Fatalf("sum only: %+v %q", rep.Overhead, rep.Warnings)
	}
}

func TestWindowEndsAtLastRequest(t *testing.T) {
	// A finished run whose schedule's seconds run on past its last
	// request (the flows' tails): the trial, its HTTPS bytes and its
	// figures end with the second of the last request.
	r := &run{seconds: make([]replay.Second, 10)}
	for i := range r.seconds {
		r.seconds[i] = replay.Second{HTTPSBytes: 100}
	}
	r.results = []replay.Result{ok(0, 0, replay.CacheMiss), ok(0, 3500*time.Millisecond, replay.CacheHit)}
	r.nets = []replay.NetSample{{Wall: time.Second, NotaryBytes: 20}}
	r.end = &replay.RunEnd{Reached: 3500 * time.Millisecond, Wall: time.Second}
	rep, err := r.build(t)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Window != (Window{0, 4, 4}) || len(rep.Seconds) != 4 {
		t.Fatalf("window %+v, %d seconds; want seconds 0-3", rep.Window, len(rep.Seconds))
	}
	if o := rep.Overhead; o.HTTPSBytes != 400 {
		t.Fatalf("HTTPS bytes %v; want the 4 seconds of the trial, 400", o.HTTPSBytes)
	}
}
