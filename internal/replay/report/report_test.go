package report

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

func openFile(path string) OpenSchedule {
	return func(*replay.RunHeader) (io.ReadCloser, error) { return os.Open(path) }
}

func build(t *testing.T, record []byte, opt Options) *Report {
	t.Helper()
	rep, err := Build(bytes.NewReader(record), openFile("testdata/schedule.jsonl"), opt)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func fixture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/record.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rows(rs []Row) map[string]int64 {
	m := map[string]int64{}
	for _, r := range rs {
		m[r.Key] = r.Count
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

// The fixture (testdata/record.jsonl, testdata/schedule.jsonl) is 28
// requests over 6 trace seconds to one notary, each second's outcomes and
// cache conditions chosen by hand:
//
//	second  results                                         successful  hits
//	0       ok miss, ok miss, 503 target, conn err, 503 overload     2     0
//	1       ok hit, ok miss, ok hit, 503 target, timeout             3     2
//	2       ok hit ×3, ok cache unknown, 500                         4     3
//	3       ok hit, 409 hit, ok hit, ok miss, not sent               4     3
//	4       ok hit ×2, 503 target, 503 other (probe wait)            2     2
//	5       ok hit ×2, conn err (left 2.3 s late), 503 target        2     2
//
// The schedule's client cache hits are 3,4,5,5,6,4 (27) and its HTTPS
// bytes 1,2,2,2,2,1 MB (10 MB). Hits take 20 ms, misses 500, 400, 600
// and 500 ms. The notary's listener had counted 21,000 bytes at the last
// sample and the probes 8,500.
func TestFixture(t *testing.T) {
	rep := build(t, fixture(t), Options{})
	if len(rep.Notaries) != 1 {
		t.Fatalf("%d notaries", len(rep.Notaries))
	}
	n := rep.Notaries[0]

	// Table 1.
	want1 := map[string]int64{"ok": 16, "conflict": 1, "unavailable": 6, "unavailable_target": 4, "unavailable_overloaded": 1,
		"unavailable_other": 1, "conn_error": 2, "timeout": 1, "other_status": 1, "not_sent": 1}
	got1 := rows(n.Outcomes.Rows)
	for k, v := range want1 {
		if got1[k] != v {
			t.Errorf("Table 1 %s: %d, want %d", k, got1[k], v)
		}
	}
	if n.Outcomes.Total != 28 || rep.Total.Total != 28 {
		t.Errorf("Table 1 total %d (all notaries %d), want 28", n.Outcomes.Total, rep.Total.Total)
	}
	for _, r := range n.Outcomes.Rows {
		if r.Key == "unavailable" && !near(r.Percent, 100*6.0/28) {
			t.Errorf("503 percent %v, want %v", r.Percent, 100*6.0/28)
		}
		if r.Key == "ok" && (r.Paper == nil || r.Paper.Count != 423438) {
			t.Errorf("ok row's paper figure %+v", r.Paper)
		}
	}
	if tg := rep.Targets; tg.Targets != 6 || tg.Dead != 2 || tg.ToDead != 4 || tg.UnavailableDead != 4 || tg.UnavailableLive != 2 {
		t.Errorf("targets %+v", tg)
	}

	// Table 2: 27 client hits + 12 notary hits + 4 misses + 1 unknown.
	want2 := map[string]int64{"client": 27, "notary": 12, "miss": 4, "unknown": 1}
	got2 := rows(n.Cache.Rows)
	for k, v := range want2 {
		if got2[k] != v {
			t.Errorf("Table 2 %s: %d, want %d", k, got2[k], v)
		}
	}
	if n.Cache.Total != 44 || !near(n.Cache.Rows[0].Percent, 100*27.0/44) || !near(n.Cache.Rows[2].Percent, 100*4.0/44) {
		t.Errorf("Table 2 %+v", n.Cache)
	}

	// Table 3: per-second ratios 0, 2/3, 3/4, 3/4, 1, 1.
	want3 := map[int]int64{65: 1, 70: 2, 75: 2, 80: 4, 85: 4, 90: 4, 95: 4, 99: 4}
	for _, l := range n.Utilisation {
		if !l.Reached || *l.Seconds != want3[l.Percent] || *l.TraceSecond != want3[l.Percent] {
			t.Errorf("Table 3 %d%%: %+v, want %d s", l.Percent, l, want3[l.Percent])
		}
	}
	if n.Utilisation[5].PaperSeconds == nil || *n.Utilisation[5].PaperSeconds != 271 {
		t.Errorf("Table 3 90%%: paper %v", n.Utilisation[5].PaperSeconds)
	}

	// Latencies.
	if l := n.Latency["hit"]; l.N != 12 || !near(l.MeanMS, 20) {
		t.Errorf("hit latency %+v", l)
	}
	if l := n.Latency["miss"]; l.N != 4 || !near(l.MeanMS, 500) || l.MaxMS != 600 || l.P50MS < 500 || l.P50MS > 505 {
		t.Errorf("miss latency %+v", l)
	}
	if l := n.Latency["successful"]; l.N != 17 || !near(l.MeanMS, (12*20+2000+50)/17.0) {
		t.Errorf("successful latency %+v", l)
	}

	// Expected delay, shares over 27 + 12 + 4 = 43.
	d := n.Delay
	if !d.Defined || !near(d.PClient, 27.0/43) || !near(d.PHit, 12.0/43) || !near(d.PMiss, 4.0/43) {
		t.Errorf("shares %+v", d)
	}
	if !near(d.Measured.DelayMS, (12*20+4*500)/43.0) {
		t.Errorf("measured delay %v, want %v", d.Measured.DelayMS, (12*20+4*500)/43.0)
	}
	if !near(d.PaperCosts.DelayMS, (27*108+12*743+4*1006)/43.0) {
		t.Errorf("delay at the paper's costs %v, want %v", d.PaperCosts.DelayMS, (27*108+12*743+4*1006)/43.0)
	}
	rep2 := build(t, fixture(t), Options{LocalCost: 10 * time.Millisecond})
	if got := rep2.Notaries[0].Delay.Measured.DelayMS; !near(got, (27*10+12*20+4*500)/43.0) {
		t.Errorf("measured delay with a 10 ms local cost %v", got)
	}

	// The paper's own: Table 2's shares at Table 4's costs give §5's 260 ms.
	if p := rep.Paper; math.Abs(p.Costs.DelayMS-260) > 0.5 || !near(p.Costs.DelayMS, (1580087*108+436085*743+38704*1006)/2054876.0) {
		t.Errorf("paper's own delay %v", p.Costs.DelayMS)
	}

	// Overhead.
	o := rep.Overhead
	if !o.Measured || o.NotaryBytes != 21000 || o.ProbeBytes != 8500 || o.HTTPSBytes != 1e7 || o.Samples != 3 || o.Wall != 6*time.Second ||
		o.FirstNotaryBytes != 1000 || !near(o.Percent, 0.21) || !near(o.PercentWithProbes, 0.295) || !near(o.BytesPerRequest, 21000/27.0) || o.Where != "listener" {
		t.Errorf("overhead %+v", o)
	}
	if !near(o.PaperPercent, 100*1.73e9/2.77e12) {
		t.Errorf("paper overhead %v", o.PaperPercent)
	}

	// Run, window and warnings.
	if rep.Window != (Window{From: 0, Until: 6, Seconds: 6}) || !rep.Run.Ended || rep.Run.Interrupted {
		t.Errorf("window %+v run %+v", rep.Window, rep.Run)
	}
	if rep.Run.MaxLag != 2300*time.Millisecond || rep.Run.LateResults != 1 {
		t.Errorf("lag %v, %d late", rep.Run.MaxLag, rep.Run.LateResults)
	}
	warn := strings.Join(rep.Warnings, "\n")
	for _, w := range []string{"1 requests (3.57%) were not sent", "left up to 2.3s", "1 successful answers did not say"} {
		if !strings.Contains(warn, w) {
			t.Errorf("warnings lack %q:\n%s", w, warn)
		}
	}
	if strings.Contains(warn, "killed") || strings.Contains(warn, "interrupted") || strings.Contains(warn, "real time") {
		t.Errorf("warnings of what did not happen:\n%s", warn)
	}

	// Series: seconds 0–5 and second 7, where the late request left.
	if len(rep.Seconds) != 8 {
		t.Fatalf("%d seconds in the series", len(rep.Seconds))
	}
	s0, s5, s7 := rep.Seconds[0], rep.Seconds[5], rep.Seconds[7]
	if s0.Scheduled != 5 || s0.Sent != 5 || s0.OK != 2 || s0.Unavailable != 2 || s0.ConnError != 1 || s0.Misses != 2 || s0.ClientHits != 3 {
		t.Errorf("second 0 %+v", s0)
	}
	if s5.Sent != 3 || s5.ConnError != 1 || s7.Sent != 1 || s7.Scheduled != 0 {
		t.Errorf("second 5 %+v, second 7 %+v", s5, s7)
	}
	if rep.Seconds[3].Sent != 4 || rep.Seconds[3].NotSent != 1 {
		t.Errorf("second 3 %+v", rep.Seconds[3])
	}
	if len(rep.Minutes) != 1 {
		t.Fatalf("%d minutes", len(rep.Minutes))
	}
	m := rep.Minutes[0]
	if m.ClientHits != 27 || m.Hits != 12 || m.Misses != 4 || m.Unknown != 1 || !near(*m.MeanHitMS, 20) || !near(*m.MeanMissMS, 500) {
		t.Errorf("minute 0 %+v", m)
	}

	// It all goes to JSON.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || back.Notaries[0].Cache.Total != 44 {
		t.Fatalf("JSON round trip: %v", err)
	}
}

func TestText(t *testing.T) {
	rep := build(t, fixture(t), Options{})
	var buf bytes.Buffer
	if err := WriteText(&buf, rep); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	// "LABEL | FIELDS" wants a line of a table: the label, then those
	// fields, spaced as they may be.
	lines := strings.Split(out, "\n")
	for _, want := range []string{
		"Table 1: every request by outcome",
		"Notary: 503 Service Unavailable | 6 21.4% 116000 20%",
		"  target unreachable | 4 14.3%",
		"Client: cached domain | 27 61.4% 1580087 77%",
		"Client timeout | 1 3.6% 803 <1%",
		"80% | 4 s 35 s",
		"99% | 4 s",
		"miss | 4 500.0 504.9 600.0 600.0 600.0",
		"= 52.1 ms",
		"= 368.7 ms",
		"= 259.7 ms (§5 states 260 ms)",
		"overhead 0.2100% (with probes 0.2950%); paper 0.06%",
		"TCP payload both ways, no IP or TCP headers",
		"WARNING: 1 requests (3.57%) were not sent",
	} {
		if label, fields, ok := strings.Cut(want, " | "); ok {
			found := false
			for _, l := range lines {
				if rest, ok := strings.CutPrefix(l, "  "+label+" "); ok && strings.Join(strings.Fields(rest), " ") == fields {
					found = true
				}
			}
			if !found {
				t.Errorf("text lacks a line %q:\n%s", want, out)
			}
			continue
		}
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestPlots(t *testing.T) {
	rep := build(t, fixture(t), Options{})
	dir := t.TempDir()
	files, err := WritePlots(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 8 {
		t.Fatalf("files %v", files)
	}
	names := map[string][]string{
		Fig2: {"schedule", "sent (by when they left)"},
		Fig3: {"workload", "unavailable (503)", "connection error", "client timeout"},
		Fig4: {"client cache hit", "notary cache hit", "cache miss"},
		Fig5: {"notary cache hit", "cache miss", "all successful"},
	}
	for fig, series := range names {
		svg, err := os.ReadFile(filepath.Join(dir, fig+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range series {
			if !bytes.Contains(svg, []byte(s)) {
				t.Errorf("%s.svg lacks series %q", fig, s)
			}
		}
		png, err := os.ReadFile(filepath.Join(dir, fig+".png"))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
			t.Errorf("%s.png: %d bytes, %v", fig, len(png), err)
		}
	}
}
