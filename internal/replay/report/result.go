package report

import (
	"cmp"
	"fmt"
	"sort"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// Report is what a run measured, with the paper's figures beside it. It
// marshals to the JSON pkie replay report --json prints.
type Report struct {
	Run Run `json:"run"`
	// Warnings say how the run falls short of a faithful replay.
	Warnings []string `json:"warnings"`
	// Window is the trace seconds the run replayed: [From, Until).
	Window Window `json:"window"`
	// Total is Table 1 over every notary; Notaries has each notary's
	// Tables 1–3, latencies and expected delay.
	Total    OutcomeTable   `json:"total_outcomes"`
	Notaries []NotaryReport `json:"notaries"`
	Targets  Targets        `json:"targets"`
	Overhead Overhead       `json:"overhead"`
	Paper    PaperExpected  `json:"paper_expected_delay"`
	Seconds  []SecondSeries `json:"seconds"`
	Minutes  []MinuteSeries `json:"minutes"`
}

// Run describes the run from its record.
type Run struct {
	Schedule string `json:"schedule"`
	Source   string `json:"source"`
	API      string `json:"api"`
	Local    string `json:"local,omitempty"`
	// Conns is how requests used connections (replay.RunHeader.Conns;
	// "reuse" for records that do not say).
	Conns   string        `json:"conns"`
	Speedup float64       `json:"speedup"`
	Timeout time.Duration `json:"timeout_ns"`
	Started time.Time     `json:"started"`
	Results int64         `json:"results"`
	// Ended says the record has its end; Interrupted that the run was
	// stopped before the schedule's end.
	Ended       bool          `json:"ended"`
	Interrupted bool          `json:"interrupted"`
	Reached     time.Duration `json:"reached_ns"`
	Wall        time.Duration `json:"wall_ns,omitempty"`
	// MaxLag is the most a request left behind its time, in trace time,
	// from the results (the record's end has its own, in wall time:
	// RecordMaxLag). LateResults counts requests that left a trace second
	// or more late: they fall in a later second of Figure 2 than their
	// own.
	MaxLag       time.Duration `json:"max_lag_trace_ns"`
	RecordMaxLag time.Duration `json:"record_max_lag_wall_ns,omitempty"`
	LateResults  int64         `json:"late_results"`
	// Malformed counts results left out of every table and figure for
	// times no replayer measures: a negative Sent or latency, or a
	// latency past the run's wall time (its end's, else its latest Sent)
	// plus the client's timeout.
	Malformed    int64  `json:"malformed,omitempty"`
	PeakInFlight int64  `json:"peak_in_flight,omitempty"`
	PeakHeap     uint64 `json:"peak_heap_bytes,omitempty"`
}

// Window is the trace seconds replayed, from the schedule's start.
type Window struct {
	From    int64 `json:"from_second"`
	Until   int64 `json:"until_second"`
	Seconds int64 `json:"seconds"`
}

// Row is one line of Table 1 or Table 2.
type Row struct {
	Key     string  `json:"key"`
	Label   string  `json:"label"`
	Count   int64   `json:"count"`
	Percent float64 `json:"percent"`
	// Part marks a row that details the row before it (the 503s by
	// reason); it is not counted again in the total.
	Part  bool      `json:"part,omitempty"`
	Paper *PaperRow `json:"paper,omitempty"`
}

// PaperRow is the paper's line for a row, as printed.
type PaperRow struct {
	Count   int64  `json:"count"`
	Percent string `json:"percent"`
}

// OutcomeTable is Table 1: every request by outcome.
type OutcomeTable struct {
	Rows  []Row `json:"rows"`
	Total int64 `json:"total"`
}

// CacheTable is Table 2: successful requests and client cache hits by
// where the answer came from.
type CacheTable struct {
	Rows  []Row `json:"rows"`
	Total int64 `json:"total"`
}

// Level is one line of Table 3.
type Level struct {
	Percent int  `json:"percent"`
	Reached bool `json:"reached"`
	// Seconds is the time from the window's start to the first second from
	// which the ratio never dropped below the level; TraceSecond is that
	// second from the schedule's start. Both are nil (null) when the level
	// was never reached.
	Seconds      *int64 `json:"seconds"`
	TraceSecond  *int64 `json:"trace_second"`
	PaperSeconds *int64 `json:"paper_seconds,omitempty"`
}

// Latency summarises the latencies of a cache condition. Percentiles are
// from 1%-wide bins (upper edge).
type Latency struct {
	N      int64   `json:"n"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
}

// NotaryReport is one notary's share of the run.
type NotaryReport struct {
	Index       int          `json:"index"`
	Name        string       `json:"name"`
	Outcomes    OutcomeTable `json:"outcomes"`
	Cache       CacheTable   `json:"cache"`
	Utilisation []Level      `json:"utilisation"`
	// Latency by cache condition: "hit", "miss" and "successful" (ok and
	// conflict, whatever their cache).
	Latency map[string]Latency `json:"latency"`
	Delay   ExpectedDelay      `json:"expected_delay"`
}

// ExpectedDelay is §5's expected validation delay per connection,
// p_client·L_client + p_hit·L_hit + p_miss·L_miss, with the shares p of
// Table 2 (unknown cache left out).
type ExpectedDelay struct {
	Formula string  `json:"formula"`
	PClient float64 `json:"p_client"`
	PHit    float64 `json:"p_hit"`
	PMiss   float64 `json:"p_miss"`
	// Measured uses this run's mean latencies and the given local cost;
	// PaperCosts the paper's Table 4 continental costs.
	Measured   Costs `json:"measured"`
	PaperCosts Costs `json:"paper_costs"`
	// Defined is false when the run had no successful request and no
	// client cache hit: there are no shares.
	Defined bool `json:"defined"`
}

// Costs are the three L of the formula and the delay they give.
type Costs struct {
	ClientMS float64 `json:"client_ms"`
	HitMS    float64 `json:"hit_ms"`
	MissMS   float64 `json:"miss_ms"`
	DelayMS  float64 `json:"delay_ms"`
}

// PaperExpected recomputes §5's 260 ms from the paper's Table 2 shares and
// Table 4 costs.
type PaperExpected struct {
	PClient float64 `json:"p_client"`
	PHit    float64 `json:"p_hit"`
	PMiss   float64 `json:"p_miss"`
	Costs   Costs   `json:"costs"`
	Stated  float64 `json:"stated_ms"`
}

// Targets relates Table 1 to the schedule's dead targets.
type Targets struct {
	Targets int64 `json:"targets"`
	Dead    int64 `json:"dead"`
	// ToDead counts results for dead targets, and of them the 503s;
	// UnavailableLive the 503s for live targets (overload, or a world
	// that failed to serve a live name).
	ToDead          int64 `json:"results_to_dead"`
	UnavailableDead int64 `json:"unavailable_to_dead"`
	UnavailableLive int64 `json:"unavailable_to_live"`
}

// Overhead is §3.5's network overhead, Notary Bytes / SSL Bytes.
type Overhead struct {
	// Measured is false when the record has no byte sample.
	Measured bool   `json:"measured"`
	Samples  int64  `json:"samples"`
	Where    string `json:"where,omitempty"`
	// NotaryBytes and ProbeBytes are the counters at the last sample
	// (Wall, since the run started): the counters are the run's own (its
	// local notary's listener, its world's listeners, its connections to
	// remote notaries) and start at zero with it. The first sample's are
	// beside them, for the bytes of the first wall second.
	Wall             time.Duration `json:"wall_ns"`
	NotaryBytes      int64         `json:"notary_bytes"`
	ProbeBytes       int64         `json:"probe_bytes"`
	FirstWall        time.Duration `json:"first_wall_ns"`
	FirstNotaryBytes int64         `json:"first_notary_bytes"`
	// HTTPSBytes is the schedule's HTTPS bytes of the window's seconds.
	HTTPSBytes float64 `json:"https_bytes"`
	// Percent is NotaryBytes / HTTPSBytes; WithProbes counts the
	// notary's probes of the targets too (the paper's capture at the
	// notary took every packet to or from port 443, both kinds).
	Percent           float64 `json:"percent"`
	PercentWithProbes float64 `json:"percent_with_probes"`
	// BytesPerRequest is the notary bytes per request sent.
	BytesPerRequest float64 `json:"notary_bytes_per_request"`
	PaperPercent    float64 `json:"paper_percent"`
	// Notaries is how many notaries NotaryBytes and Percent sum over.
	// §3.5's overhead is one notary's (the paper had one): with several,
	// PerNotary has each one's, when the record counted them apart
	// (replay.NetSample.NotaryBytesEach); otherwise only the sum is known
	// and the report warns of it.
	Notaries  int              `json:"notaries"`
	PerNotary []NotaryOverhead `json:"per_notary,omitempty"`
}

// NotaryOverhead is one notary's bytes at the last sample and its share of
// the HTTPS bytes.
type NotaryOverhead struct {
	Index       int     `json:"index"`
	Name        string  `json:"name"`
	NotaryBytes int64   `json:"notary_bytes"`
	Percent     float64 `json:"percent"`
	// BytesPerRequest is its bytes per request sent to it.
	BytesPerRequest float64 `json:"notary_bytes_per_request"`
}

// SecondSeries is one trace second, over every notary (Figures 2 and 3).
type SecondSeries struct {
	Second     int64   `json:"second"`
	Scheduled  int64   `json:"scheduled"`
	ClientHits int64   `json:"client_hits"`
	HTTPSBytes float64 `json:"https_bytes"`
	// Sent counts results that left in this trace second (a late request
	// counts where it left); the rest count by the request's own second.
	Sent        int64 `json:"sent"`
	OK          int64 `json:"ok"`
	Conflict    int64 `json:"conflict"`
	Unavailable int64 `json:"unavailable"`
	ConnError   int64 `json:"conn_error"`
	Timeout     int64 `json:"timeout"`
	OtherStatus int64 `json:"other_status"`
	NotSent     int64 `json:"not_sent"`
	Hits        int64 `json:"hits"`
	Misses      int64 `json:"misses"`
	Unknown     int64 `json:"unknown_cache"`
}

// MinuteSeries is one trace minute, over every notary (Figures 4 and 5).
// Mean delays are absent for a minute without such requests.
type MinuteSeries struct {
	Minute           int64    `json:"minute"`
	ClientHits       int64    `json:"client_hits"`
	Hits             int64    `json:"hits"`
	Misses           int64    `json:"misses"`
	Unknown          int64    `json:"unknown_cache"`
	MeanHitMS        *float64 `json:"mean_hit_ms,omitempty"`
	MeanMissMS       *float64 `json:"mean_miss_ms,omitempty"`
	MeanSuccessfulMS *float64 `json:"mean_successful_ms,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pct(n, total int64) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(n) / float64(total)
}

var rowLabels = [nRows]string{
	"Notary: 200 OK (the paper's notary: 202 Accepted)",
	"Notary: 409 Conflict",
	"target unreachable",
	"notary overloaded",
	"other reason",
	"Client-notary connection error",
	"Client timeout",
	"Notary: other status",
	"Not sent (replayer's in-flight bound, or stopped)",
	"Unrecognised outcome",
}

func outcomeTable(c *counts) OutcomeTable {
	var t OutcomeTable
	for _, n := range c.rows {
		t.Total += n
	}
	row := func(i int) Row {
		return Row{Key: rowKeys[i], Label: rowLabels[i], Count: c.rows[i], Percent: pct(c.rows[i], t.Total)}
	}
	ok := row(rowOK)
	ok.Paper = &PaperRow{PaperOK, "74%"}
	t.Rows = append(t.Rows, ok, row(rowConflict))
	u := c.rows[rowUnavailTarget] + c.rows[rowUnavailOverload] + c.rows[rowUnavailOther]
	t.Rows = append(t.Rows, Row{Key: "unavailable", Label: "Notary: 503 Service Unavailable", Count: u, Percent: pct(u, t.Total),
		Paper: &PaperRow{PaperUnavailable, "20%"}})
	for _, i := range []int{rowUnavailTarget, rowUnavailOverload, rowUnavailOther} {
		r := row(i)
		r.Part = true
		t.Rows = append(t.Rows, r)
	}
	ce, to := row(rowConnError), row(rowTimeout)
	ce.Paper = &PaperRow{PaperConnError, "6%"}
	to.Paper = &PaperRow{PaperTimeout, "<1%"}
	t.Rows = append(t.Rows, ce, to, row(rowStatus), row(rowNotSent))
	if c.rows[rowUnrecognised] > 0 {
		t.Rows = append(t.Rows, row(rowUnrecognised))
	}
	return t
}

func cacheTable(client int64, c *counts) CacheTable {
	t := CacheTable{Total: client + c.hit + c.miss + c.unknown}
	t.Rows = []Row{
		{Key: "client", Label: "Client: cached domain", Count: client, Paper: &PaperRow{PaperClientHits, "77%"}},
		{Key: "notary", Label: "Notary: cached domain", Count: c.hit, Paper: &PaperRow{PaperNotaryHits, "21%"}},
		{Key: "miss", Label: "Cache miss", Count: c.miss, Paper: &PaperRow{PaperMisses, "1%"}},
		{Key: "unknown", Label: "Notary: cache not known", Count: c.unknown},
	}
	for i := range t.Rows {
		t.Rows[i].Percent = pct(t.Rows[i].Count, t.Total)
	}
	return t
}

// utilisation is Table 3 over one notary's seconds [lo, hi): for each
// second with successful requests, the ratio of notary cache hits to
// successful requests; a level is reached at the first second from which
// the ratio never again drops below it (Forced Perspectives, §3.4).
// Seconds without successful requests have no ratio and neither hold nor
// break a level.
func utilisation(secs []counts, lo, hi int) []Level {
	type point struct {
		sec       int
		hit, succ int64
	}
	var pts []point
	for s := lo; s < hi && s < len(secs); s++ {
		if n := secs[s].successful(); n > 0 {
			pts = append(pts, point{s, secs[s].hit, n})
		}
	}
	var out []Level
	for _, lv := range Levels {
		l := Level{Percent: lv}
		if p, ok := paperLevels[lv]; ok {
			l.PaperSeconds = &p
		}
		// Walk back from the end while the ratio holds the level.
		first := -1
		for i := len(pts) - 1; i >= 0; i-- {
			if 100*pts[i].hit < int64(lv)*pts[i].succ {
				break
			}
			first = i
		}
		if first >= 0 {
			l.Reached = true
			ts, since := int64(pts[first].sec), int64(pts[first].sec-lo)
			l.TraceSecond, l.Seconds = &ts, &since
		}
		out = append(out, l)
	}
	return out
}

func latencyOf(l *latency) Latency {
	return Latency{N: l.n, MeanMS: ms(l.mean()), P50MS: ms(l.quantile(0.5)), P90MS: ms(l.quantile(0.9)),
		P99MS: ms(l.quantile(0.99)), MaxMS: ms(l.max)}
}

const delayFormula = "p_client·L_client + p_hit·L_hit + p_miss·L_miss"

func delay(pc, ph, pm float64, lc, lh, lm float64) Costs {
	return Costs{ClientMS: lc, HitMS: lh, MissMS: lm, DelayMS: pc*lc + ph*lh + pm*lm}
}

func expectedDelay(client int64, a *notaryAgg, local time.Duration) ExpectedDelay {
	d := ExpectedDelay{Formula: delayFormula}
	n := client + a.total.hit + a.total.miss
	if n == 0 {
		return d
	}
	d.Defined = true
	d.PClient = float64(client) / float64(n)
	d.PHit = float64(a.total.hit) / float64(n)
	d.PMiss = float64(a.total.miss) / float64(n)
	d.Measured = delay(d.PClient, d.PHit, d.PMiss, ms(local), ms(a.lat[condHit].mean()), ms(a.lat[condMiss].mean()))
	d.PaperCosts = delay(d.PClient, d.PHit, d.PMiss, ms(PaperCostClient), ms(PaperCostHit), ms(PaperCostMiss))
	return d
}

func paperDelay() PaperExpected {
	n := float64(PaperClientHits + PaperNotaryHits + PaperMisses)
	p := PaperExpected{PClient: PaperClientHits / n, PHit: PaperNotaryHits / n, PMiss: PaperMisses / n, Stated: ms(PaperDelay)}
	p.Costs = delay(p.PClient, p.PHit, p.PMiss, ms(PaperCostClient), ms(PaperCostHit), ms(PaperCostMiss))
	return p
}

func (b *builder) finish(h *replay.RunHeader, end *replay.RunEnd, nets []replay.NetSample, nNet int64, opt Options) *Report {
	sum := b.sum
	rep := &Report{Warnings: []string{}, Paper: paperDelay()}
	rep.Run = Run{Schedule: h.Schedule, Source: h.ScheduleHeader.Source, API: h.API, Local: h.Local, Conns: cmp.Or(h.Conns, replay.ConnsReuse), Speedup: h.Speedup,
		Timeout: h.Timeout, Started: h.Started, Results: b.results, Ended: end != nil, MaxLag: b.maxLag, LateResults: b.lateLags,
		Malformed: b.malformed}

	// The window: from From to the second of the last request the run
	// reached (killed: the last it recorded), within Until. Partial first
	// and last seconds count whole. The schedule's seconds run on to the
	// end of its last flow, but the trial is the requests' span, as the
	// paper's hour was: flows' tails past it are not the trial's HTTPS
	// bytes, and the figures would only draw empty minutes.
	lo := int(h.From / time.Second)
	hi := len(sum.Seconds)
	if h.Until > 0 {
		hi = min(hi, int((h.Until+time.Second-1)/time.Second))
	}
	reached := b.maxT
	if end != nil {
		rep.Run.Interrupted, rep.Run.Wall, rep.Run.RecordMaxLag = end.Interrupted, end.Wall, end.MaxLag
		rep.Run.PeakInFlight, rep.Run.PeakHeap = end.PeakInFlight, end.PeakHeap
		reached = max(reached, end.Reached)
	}
	rep.Run.Reached = reached
	hi = min(hi, int(reached/time.Second)+1)
	if !b.seenT && (end == nil || end.Interrupted) {
		hi = lo
	}
	lo = min(lo, hi)
	rep.Window = Window{From: int64(lo), Until: int64(hi), Seconds: int64(hi - lo)}

	var clientHits int64
	var https float64
	for s := lo; s < hi; s++ {
		clientHits += sum.Seconds[s].ClientHits
		https += sum.Seconds[s].HTTPSBytes
	}

	var total counts
	for i, a := range b.notaries {
		total.add(&a.total)
		nr := NotaryReport{Index: i, Name: h.Notaries[i], Outcomes: outcomeTable(&a.total), Cache: cacheTable(clientHits, &a.total),
			Utilisation: utilisation(a.secs, lo, hi), Latency: map[string]Latency{},
			Delay: expectedDelay(clientHits, a, opt.LocalCost)}
		for c, name := range []string{"hit", "miss", "successful"} {
			nr.Latency[name] = latencyOf(&a.lat[c])
		}
		rep.Notaries = append(rep.Notaries, nr)
	}
	rep.Total = outcomeTable(&total)

	rep.Targets = Targets{Targets: sum.Targets, Dead: sum.DeadTargets, UnavailableLive: b.toLive503}
	for _, n := range b.toDead {
		rep.Targets.ToDead += n
	}
	rep.Targets.UnavailableDead = b.toDead[rowUnavailTarget] + b.toDead[rowUnavailOverload] + b.toDead[rowUnavailOther]

	o := Overhead{Samples: nNet, HTTPSBytes: https, PaperPercent: 100 * PaperNotaryBytes / PaperHTTPSBytes}
	if len(nets) > 0 {
		first, last := nets[0], nets[len(nets)-1]
		o.Measured = true
		o.Where, o.Wall, o.NotaryBytes, o.ProbeBytes = last.Where, last.Wall, last.NotaryBytes, last.ProbeBytes
		o.FirstWall, o.FirstNotaryBytes = first.Wall, first.NotaryBytes
		if https > 0 {
			o.Percent = 100 * float64(o.NotaryBytes) / https
			o.PercentWithProbes = 100 * float64(o.NotaryBytes+o.ProbeBytes) / https
		}
		if sent := total.results() - total.rows[rowNotSent]; sent > 0 {
			o.BytesPerRequest = float64(o.NotaryBytes) / float64(sent)
		}
		// ReadRecord checked that the list has one count per notary.
		for i, nb := range last.NotaryBytesEach {
			no := NotaryOverhead{Index: i, Name: h.Notaries[i], NotaryBytes: nb}
			if https > 0 {
				no.Percent = 100 * float64(nb) / https
			}
			if i < len(b.notaries) {
				a := &b.notaries[i].total
				if sent := a.results() - a.rows[rowNotSent]; sent > 0 {
					no.BytesPerRequest = float64(nb) / float64(sent)
				}
			}
			o.PerNotary = append(o.PerNotary, no)
		}
	}
	o.Notaries = len(h.Notaries)
	rep.Overhead = o

	rep.Seconds, rep.Minutes = b.series(lo, hi)
	rep.Warnings = b.warnings(rep, h, end, &total, nNet, https)
	return rep
}

func (c *counts) results() int64 {
	var n int64
	for _, v := range c.rows {
		n += v
	}
	return n
}

// series returns Figures 2–5's data over the window, extended to any
// second a result fell in outside it.
func (b *builder) series(lo, hi int) ([]SecondSeries, []MinuteSeries) {
	last := hi
	lastMin := 0
	for _, a := range b.notaries {
		for s := len(a.secs) - 1; s >= last; s-- {
			if a.secs[s] != (counts{}) {
				last = s + 1
				break
			}
		}
		lastMin = max(lastMin, len(a.mins))
	}
	first := lo
	for _, a := range b.notaries {
		for s := 0; s < first && s < len(a.secs); s++ {
			if a.secs[s] != (counts{}) {
				first = s
				break
			}
		}
	}
	secs := make([]SecondSeries, 0, last-first)
	for s := first; s < last; s++ {
		row := SecondSeries{Second: int64(s)}
		if s < len(b.sum.Seconds) {
			sec := b.sum.Seconds[s]
			row.Scheduled, row.ClientHits, row.HTTPSBytes = sec.Requests, sec.ClientHits, sec.HTTPSBytes
		}
		for _, a := range b.notaries {
			if s >= len(a.secs) {
				continue
			}
			c := &a.secs[s]
			row.Sent += c.sentAt
			row.OK += c.rows[rowOK]
			row.Conflict += c.rows[rowConflict]
			row.Unavailable += c.rows[rowUnavailTarget] + c.rows[rowUnavailOverload] + c.rows[rowUnavailOther]
			row.ConnError += c.rows[rowConnError]
			row.Timeout += c.rows[rowTimeout]
			row.OtherStatus += c.rows[rowStatus] + c.rows[rowUnrecognised]
			row.NotSent += c.rows[rowNotSent]
			row.Hits += c.hit
			row.Misses += c.miss
			row.Unknown += c.unknown
		}
		secs = append(secs, row)
	}

	firstMin, lastMinute := first/60, max(lastMin, (last+59)/60)
	mins := make([]MinuteSeries, 0, lastMinute-firstMin)
	for m := firstMin; m < lastMinute; m++ {
		row := MinuteSeries{Minute: int64(m)}
		for s := max(m*60, lo); s < min(m*60+60, hi, len(b.sum.Seconds)); s++ {
			row.ClientHits += b.sum.Seconds[s].ClientHits
		}
		var agg minute
		for _, a := range b.notaries {
			for s := m * 60; s < m*60+60 && s < len(a.secs); s++ {
				row.Hits += a.secs[s].hit
				row.Misses += a.secs[s].miss
				row.Unknown += a.secs[s].unknown
			}
			if m < len(a.mins) {
				for c := range nConds {
					agg.sum[c] += a.mins[m].sum[c]
					agg.n[c] += a.mins[m].n[c]
				}
			}
		}
		mean := func(c int) *float64 {
			if agg.n[c] == 0 {
				return nil
			}
			v := ms(time.Duration(agg.sum[c] / float64(agg.n[c])))
			return &v
		}
		row.MeanHitMS, row.MeanMissMS, row.MeanSuccessfulMS = mean(condHit), mean(condMiss), mean(condSuccessful)
		mins = append(mins, row)
	}
	return secs, mins
}

func (b *builder) warnings(rep *Report, h *replay.RunHeader, end *replay.RunEnd, total *counts, nNet int64, https float64) []string {
	w := []string{}
	add := func(format string, a ...any) { w = append(w, fmt.Sprintf(format, a...)) }
	if end == nil {
		add("the record has no end: the run was killed; this report covers what it recorded, up to trace time %v", rep.Run.Reached)
	} else if end.Interrupted {
		add("the run was interrupted (Ctrl-C) at trace time %v, before the schedule's end", end.Reached)
	}
	if o := rep.Overhead; o.Measured && o.Notaries > 1 && len(o.PerNotary) == 0 {
		add("the record counts the bytes of its %d notaries together: the overhead is their sum, not one notary's as in §3.5", o.Notaries)
	}
	if n := b.malformed; n > 0 {
		add("%d results are malformed (a negative sent time or latency, or a latency past the run's wall time plus its %v timeout) and are left out of every table and figure", n, h.Timeout)
	}
	if n := total.rows[rowNotSent]; n > 0 {
		add("%d requests (%.2f%%) were not sent: the replayer fell behind or stopped, so this is not a faithful replay", n, pct(n, total.results()))
	}
	if h.Speedup != 1 {
		add("the run replayed at %g× real time: the notary saw the trace's load %g times over (the paper replayed in real time); times in the tables are trace time", h.Speedup, h.Speedup)
	}
	if rep.Run.MaxLag >= time.Second {
		add("requests left up to %v (trace time) behind their time; %d left a trace second or more late, so the load over time is not the trace's", rep.Run.MaxLag.Round(time.Millisecond), rep.Run.LateResults)
	}
	if total.unknown > 0 {
		add("%d successful answers did not say whether they came from the notary's cache: Tables 2 and 3 count them as successful but as neither hit nor miss", total.unknown)
	}
	if n := total.rows[rowUnrecognised]; n > 0 {
		var names []string
		for k := range b.unknownOutcomes {
			names = append(names, fmt.Sprintf("%q", k))
		}
		sort.Strings(names)
		add("%d results have an outcome this pkie does not know (%v); Table 1 counts them apart", n, names)
	}
	if want := b.sum.Requests * int64(len(h.Notaries)); want > 0 && total.results() > want {
		add("the record has %d results, more than the schedule's %d requests × %d notaries", total.results(), b.sum.Requests, len(h.Notaries))
	}
	if nNet == 0 {
		add("the record has no byte sample: the network overhead is not measured")
	} else if https == 0 {
		add("the schedule counts no HTTPS bytes in the replayed seconds (its trace format had none): the overhead ratio is not defined")
	}
	return w
}
