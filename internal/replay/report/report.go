// Package report reads the run record of a replayed schedule, and the
// schedule, and measures the replay as Forced Perspectives (IMC 2014)
// measured its notary: every request by outcome (Table 1), the client
// cache, notary cache and misses over successful requests (Table 2), the
// time the notary's cache took to reach each utilisation level (Table 3),
// requests, outcomes, cache hits and delays over time (Figures 2–5), the
// network overhead (§3.5) and the expected validation delay per connection
// (§5).
//
// The record is streamed: the report keeps counters per notary and trace
// second, sums per trace minute and a latency histogram per cache
// condition, never the results themselves, so a run of any length fits in
// memory proportional to its duration.
package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// The paper's published figures, printed beside the run's (Forced
// Perspectives, IMC 2014, Tables 1–4, §3.5 and §5).
const (
	PaperOK          = 423438 // Table 1, "Notary: 202 Accepted"
	PaperUnavailable = 116000 // Table 1, "Notary: 503 Service Unavailable"
	PaperConnError   = 33837  // Table 1, "Client-Notary Connection Error"
	PaperTimeout     = 803    // Table 1, "Client Timeout"

	PaperClientHits = 1580087 // Table 2, "Client: Cached Domain"
	PaperNotaryHits = 436085  // Table 2, "Notary: Cached Domain"
	PaperMisses     = 38704   // Table 2, "Cache Miss"

	PaperNotaryBytes = 1.73e9  // §3.5: Convergence traffic, 1.73 GB
	PaperHTTPSBytes  = 2.77e12 // §3.5: SSL traffic during the trial, 2.77 TB

	// Table 4, continental notary set (3 notaries).
	PaperCostClient = 108 * time.Millisecond  // "Local Cache Hit"
	PaperCostHit    = 743 * time.Millisecond  // "Notary Cache Hit, Continental"
	PaperCostMiss   = 1006 * time.Millisecond // "Notary Cache Miss, Continental"

	PaperDelay = 260 * time.Millisecond // §5: expected validation delay
)

// Levels are the notary cache utilisation levels of Table 3 (the paper's
// 65–90% and two more).
var Levels = []int{65, 70, 75, 80, 85, 90, 95, 99}

// paperLevels is Table 3: seconds from the start of the trial.
var paperLevels = map[int]int64{65: 16, 70: 25, 75: 27, 80: 35, 85: 122, 90: 271}

// Options tune a report.
type Options struct {
	// LocalCost is L_client of the measured expected delay: what a
	// connection whose certificate the client had cached costs. The run
	// does not measure it (a client cache hit sends nothing), so it is 0
	// unless given.
	LocalCost time.Duration
}

// OpenSchedule opens the schedule a run replayed, given the record's
// header (whose Schedule names its path).
type OpenSchedule func(h *replay.RunHeader) (io.ReadCloser, error)

// Rows of Table 1.
const (
	rowOK = iota
	rowConflict
	rowUnavailTarget
	rowUnavailOverload
	rowUnavailOther
	rowConnError
	rowTimeout
	rowStatus
	rowNotSent
	rowUnrecognised
	nRows
)

var rowKeys = [nRows]string{"ok", "conflict", "unavailable_target", "unavailable_overloaded", "unavailable_other",
	"conn_error", "timeout", "other_status", "not_sent", "unrecognised"}

// Cache conditions of latency statistics and Figure 5.
const (
	condHit = iota
	condMiss
	condSuccessful
	nConds
)

type counts struct {
	rows               [nRows]int64
	hit, miss, unknown int64 // among ok and conflict
	sentAt             int64 // left in this trace second (by Sent, not T)
}

func (c *counts) successful() int64 { return c.rows[rowOK] + c.rows[rowConflict] }

func (c *counts) add(o *counts) {
	for i := range c.rows {
		c.rows[i] += o.rows[i]
	}
	c.hit += o.hit
	c.miss += o.miss
	c.unknown += o.unknown
	c.sentAt += o.sentAt
}

type minute struct {
	// sum is in float64 nanoseconds: an int64 sum of a long run's
	// latencies could overflow.
	sum [nConds]float64
	n   [nConds]int64
}

type notaryAgg struct {
	secs  []counts // by trace second of T (sentAt: of leaving)
	mins  []minute // by trace minute of T
	total counts
	lat   [nConds]latency
}

// classify maps a result to its Table 1 row.
func classify(r *replay.Result) int {
	switch r.Outcome {
	case replay.OutcomeOK:
		return rowOK
	case replay.OutcomeConflict:
		return rowConflict
	case replay.OutcomeUnavailable:
		// pkie's notary says why in its 503's message (the driver
		// records it as Error, "status 503: cannot verify HOST:PORT:
		// WHY"): its probe failed ("cannot connect to the target", "TLS
		// handshake with the target failed", …) or it was at a
		// concurrency bound ("notary overloaded: too many probes queued
		// for this target", "server overloaded: too many requests in
		// progress"). The target's name is taken out first: it is the
		// trace's, and could say anything.
		e := strings.ToLower(r.Error)
		if h := strings.ToLower(r.Host); h != "" {
			e = strings.ReplaceAll(e, h, "")
		}
		switch {
		case strings.Contains(e, "overloaded") || strings.Contains(e, "too many requests"):
			return rowUnavailOverload
		case strings.Contains(e, "target"):
			return rowUnavailTarget
		}
		return rowUnavailOther
	case replay.OutcomeConnError:
		return rowConnError
	case replay.OutcomeTimeout:
		return rowTimeout
	case replay.OutcomeStatus:
		return rowStatus
	case replay.OutcomeNotSent:
		return rowNotSent
	}
	return rowUnrecognised
}

// Limits on what a record may claim, so a corrupt one cannot make the
// report allocate without bound.
const (
	maxNotaries = 256
	// slackSeconds is how far past the schedule's last second a request
	// may leave and still be binned by its second (later ones go in the
	// last bin).
	slackSeconds = 3600
)

type builder struct {
	h               *replay.RunHeader
	sum             *replay.ScheduleSummary
	dead            map[string]bool
	notaries        []*notaryAgg
	nsec            int // seconds binned
	from            time.Duration
	speedup         float64
	maxT            time.Duration
	seenT           bool
	maxLag          time.Duration
	lateLags        int64 // results that left a trace second or more behind
	toDead          [nRows]int64
	toLive503       int64
	results         int64
	unknownOutcomes map[string]bool

	// Latencies are checked against the record's wall time plus the
	// client's timeout, which only its end says: results whose latency
	// exceeds the timeout wait in held for it (at most maxHeld; past
	// that they are judged against the wall time seen so far).
	timeout   time.Duration
	maxSent   time.Duration // latest Sent of the results read
	netWall   time.Duration // latest byte sample's wall time
	held      []replay.Result
	malformed int64
}

// maxHeld bounds the results held for the end's wall time. A real run's
// results exceed the client's timeout only by scheduling slack, and few
// do.
const maxHeld = 1 << 16

// maxLeft caps a result's leaving time in trace time, far past any
// schedule, so that a hostile Sent times the speed-up cannot overflow.
const maxLeft = 1 << 62

// wallBound is the latest a result may have completed by: the run's wall
// time (its end's, else its latest Sent or byte sample) plus the client's
// timeout.
func (b *builder) wallBound(end *replay.RunEnd) time.Duration {
	w := max(b.maxSent, b.netWall)
	if end != nil {
		w = end.Wall
	}
	if w > math.MaxInt64-b.timeout {
		return math.MaxInt64
	}
	return w + b.timeout
}

// Build reads a run record from record, opens the schedule it replayed
// with open, and measures the run.
func Build(record io.Reader, open OpenSchedule, opt Options) (*Report, error) {
	br := bufio.NewReaderSize(record, 64<<10)
	first, err := firstLine(br, replay.MaxScheduleLine)
	if err != nil {
		return nil, fmt.Errorf("report: reading the run record: %w", err)
	}
	var h replay.RunHeader
	if err := json.Unmarshal(first, &h); err != nil || h.Type != replay.TypeRun {
		// ReadRecord says exactly what is wrong.
		_, _, err := replay.ReadRecord(io.MultiReader(bytes.NewReader(first), br), nil, nil)
		if err == nil {
			err = errors.New("replay: run record does not start with its run header")
		}
		return nil, fmt.Errorf("report: %w", err)
	}
	if h.Version != replay.RecordVersion {
		return nil, fmt.Errorf("report: run record version %d; this pkie reads version %d", h.Version, replay.RecordVersion)
	}
	if len(h.Notaries) > maxNotaries {
		return nil, fmt.Errorf("report: run record names %d notaries; at most %d", len(h.Notaries), maxNotaries)
	}

	if open == nil {
		return nil, errors.New("report: no schedule to read the run's against")
	}
	rc, err := open(&h)
	if err != nil {
		return nil, fmt.Errorf("report: opening the schedule: %w", err)
	}
	sr, err := replay.NewScheduleReader(rc)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("report: %w", err)
	}
	targets, sum, err := sr.Rest()
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if sr.Header.Source != h.ScheduleHeader.Source || !sr.Header.Start.Equal(h.ScheduleHeader.Start) {
		return nil, fmt.Errorf("report: the schedule (source %q, start %s) is not the one the run replayed (source %q, start %s)",
			sr.Header.Source, sr.Header.Start.Format(time.RFC3339Nano), h.ScheduleHeader.Source, h.ScheduleHeader.Start.Format(time.RFC3339Nano))
	}

	b := &builder{h: &h, sum: sum, dead: map[string]bool{}, from: h.From, speedup: h.Speedup, timeout: max(h.Timeout, 0)}
	if b.speedup <= 0 || math.IsNaN(b.speedup) || math.IsInf(b.speedup, 0) {
		return nil, fmt.Errorf("report: run record's speed-up %v is not a positive number", h.Speedup)
	}
	for _, t := range targets {
		if t.Dead {
			b.dead[replay.TargetKey(t.Host, t.Port)] = true
		}
	}
	b.nsec = len(sum.Seconds) + slackSeconds
	for range h.Notaries {
		b.notaries = append(b.notaries, &notaryAgg{})
	}
	var nets []replay.NetSample // first and last only
	var nNet int64
	hh, end, err := replay.ReadRecord(io.MultiReader(bytes.NewReader(first), br), b.result, func(s replay.NetSample) error {
		nNet++
		b.netWall = max(b.netWall, s.Wall)
		if len(nets) < 2 {
			nets = append(nets, s)
		} else {
			nets[1] = s
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	b.release(end)
	return b.finish(hh, end, nets, nNet, opt), nil
}

// firstLine reads the header's line, no longer than limit bytes (as
// ReadRecord bounds every line), so that a file without line breaks is not
// read whole into memory.
func firstLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		b, err := br.ReadSlice('\n')
		line = append(line, b...)
		if len(line) > limit {
			return nil, fmt.Errorf("first line longer than %d bytes", limit)
		}
		switch {
		case err == nil, errors.Is(err, io.EOF):
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

func (a *notaryAgg) sec(i int) *counts {
	for len(a.secs) <= i {
		a.secs = append(a.secs, counts{})
	}
	return &a.secs[i]
}

func (a *notaryAgg) min(i int) *minute {
	for len(a.mins) <= i {
		a.mins = append(a.mins, minute{})
	}
	return &a.mins[i]
}

func (b *builder) result(r replay.Result) error {
	if r.Notary < 0 || r.Notary >= len(b.notaries) {
		return fmt.Errorf("result %d names notary %d; the run header lists %d", r.Seq, r.Notary, len(b.notaries))
	}
	if r.T < 0 || r.T >= time.Duration(len(b.sum.Seconds)+1)*time.Second {
		return fmt.Errorf("result %d at trace time %v is outside the schedule's %d seconds", r.Seq, r.T, len(b.sum.Seconds))
	}
	// Times a replayer cannot have measured: counted as malformed and
	// left out, so that one bad line cannot make every mean nonsense.
	if r.Sent < 0 || r.Latency < 0 {
		b.malformed++
		return nil
	}
	b.maxSent = max(b.maxSent, r.Sent)
	if r.Latency > b.timeout {
		if len(b.held) < maxHeld {
			b.held = append(b.held, r)
			return nil
		}
		if r.Latency > b.wallBound(nil) {
			b.malformed++
			return nil
		}
	}
	b.add(r)
	return nil
}

// release judges the held results once the record's end (if any) is read.
func (b *builder) release(end *replay.RunEnd) {
	bound := b.wallBound(end)
	for _, r := range b.held {
		if r.Latency > bound {
			b.malformed++
			continue
		}
		b.add(r)
	}
	b.held = nil
}

// add counts a result that passed the checks.
func (b *builder) add(r replay.Result) {
	b.results++
	if !b.seenT || r.T > b.maxT {
		b.maxT, b.seenT = r.T, true
	}
	a := b.notaries[r.Notary]
	row := classify(&r)
	if row == rowUnrecognised {
		if b.unknownOutcomes == nil {
			b.unknownOutcomes = map[string]bool{}
		}
		if len(b.unknownOutcomes) < 10 {
			b.unknownOutcomes[r.Outcome] = true
		}
	}
	s := int(r.T / time.Second)
	c := a.sec(s)
	c.rows[row]++
	a.total.rows[row]++
	if b.dead[replay.TargetKey(r.Host, r.Port)] {
		b.toDead[row]++
	} else if r.Outcome == replay.OutcomeUnavailable {
		b.toLive503++
	}
	if row == rowNotSent {
		return
	}

	// When it left, in trace time: Started is trace time From, and wall
	// time runs Speedup times slower than trace time.
	left := b.from + time.Duration(min(float64(r.Sent)*b.speedup, float64(maxLeft)))
	ls := int(left / time.Second)
	if left < 0 {
		ls = 0
	}
	ls = min(ls, b.nsec-1)
	a.sec(ls).sentAt++
	if lag := left - r.T; lag > b.maxLag {
		b.maxLag = lag
	}
	if left-r.T >= time.Second {
		b.lateLags++
	}

	if row != rowOK && row != rowConflict {
		return
	}
	m := a.min(int(r.T / time.Minute))
	add := func(cond int) {
		m.sum[cond] += float64(r.Latency)
		m.n[cond]++
		a.lat[cond].add(r.Latency)
	}
	add(condSuccessful)
	switch r.Cache {
	case replay.CacheHit:
		c.hit++
		a.total.hit++
		add(condHit)
	case replay.CacheMiss:
		c.miss++
		a.total.miss++
		add(condMiss)
	default:
		c.unknown++
		a.total.unknown++
	}
	return
}
