package replay

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"
)

// A schedule is the second stage's output and the third's input: the
// requests a deployment of notaries would have received from a trace's
// clients, in time order, after each client's own cache (Forced
// Perspectives, IMC 2014, §3.1–§3.2). It is JSON lines, each object tagged
// by "type" (docs/formats/notary-and-tools.md, "Request schedules"):
//
//	header    one, first: where the schedule came from and how it was made
//	request   zero or more, by time: one request a client would have sent
//	target    one per distinct target, after the requests
//	summary   one, last: counts and a per-second series of the trace
//
// A schedule without its summary was cut short; readers refuse it.

// ScheduleVersion is the schedule format's version.
const ScheduleVersion = 1

// Record types of schedules and run records.
const (
	TypeHeader  = "header"
	TypeRequest = "request"
	TypeTarget  = "target"
	TypeSummary = "summary"
	TypeRun     = "run"
	TypeResult  = "result"
	TypeNet     = "net"
	TypeEnd     = "end"
)

// ScheduleHeader opens a schedule.
type ScheduleHeader struct {
	Type    string `json:"type"` // TypeHeader
	Version int    `json:"version"`
	// Source says what the flows came from: a trace's path and format, or
	// "generator" with its parameters.
	Source string `json:"source"`
	// Start is the trace's first flow's start; request times are offsets
	// from it.
	Start time.Time `json:"start"`
	// Naming lists the naming methods in the order tried: "sni", "map",
	// "rdns".
	Naming []string `json:"naming"`
	// CacheLifetime is how long a client's cache entry lasted; 0 means
	// for the whole trace, as in the paper.
	CacheLifetime time.Duration `json:"cache_lifetime_ns"`
}

// Request is one request a client would have sent to the notaries: the
// first flow of a (client, target) pair not in the client's cache.
type Request struct {
	Type string `json:"type"` // TypeRequest
	// T is the request's time, the flow's start, as an offset from the
	// header's Start.
	T      time.Duration `json:"t_ns"`
	Client netip.Addr    `json:"client"`
	Host   string        `json:"host"`
	Port   uint16        `json:"port"`
}

// Target is one distinct (host, port) the schedule's requests name.
type Target struct {
	Type string `json:"type"` // TypeTarget
	Host string `json:"host"`
	Port uint16 `json:"port"`
	// Flows and Requests count the named flows to it and the requests
	// left after the client caches.
	Flows    int64 `json:"flows"`
	Requests int64 `json:"requests"`
	// Dead marks a target that no longer serves TLS: the trace saw its
	// server never answer (every flow to it counted packets both ways and
	// none came back), or the generator chose it dead. A synthetic world
	// makes it refuse connections.
	Dead bool `json:"dead,omitempty"`
}

// ScheduleSummary closes a schedule.
type ScheduleSummary struct {
	Type string `json:"type"` // TypeSummary
	// Trace is what the trace reader counted.
	Trace Stats `json:"trace"`
	// Flows is how many kept flows the schedule was made from, and how
	// each was named: from the trace's SNI, from the mapping file, from
	// reverse DNS, or not at all (lost: the flow issues no request).
	Flows     int64 `json:"flows"`
	NamedSNI  int64 `json:"named_sni"`
	NamedMap  int64 `json:"named_map"`
	NamedRDNS int64 `json:"named_rdns"`
	Unnamed   int64 `json:"unnamed"`
	// SNIRecovered, when address naming was also tried on flows the SNI
	// named, counts those whose address had no name: the flows the paper's
	// reverse-DNS method would have lost and the SNI recovers. -1 when
	// not measured.
	SNIRecovered int64 `json:"sni_recovered"`
	// ClientCacheHits counts named flows whose (client, target) pair was
	// in the client's cache: no request.
	ClientCacheHits int64 `json:"client_cache_hits"`
	// CacheEvicted counts cache entries dropped to bound memory before
	// their lifetime ended (each may cost one extra request).
	CacheEvicted int64 `json:"cache_evicted,omitempty"`
	Requests     int64 `json:"requests"`
	Targets      int64 `json:"targets"`
	DeadTargets  int64 `json:"dead_targets"`
	// Late counts flows that arrived further out of time order than the
	// reorder window allowed; their requests were written at the window's
	// edge rather than their own time.
	Late int64 `json:"late,omitempty"`
	// HTTPSBytes is the trace's HTTPS bytes, both ways, of the kept flows
	// (0 when the format does not count bytes).
	HTTPSBytes float64 `json:"https_bytes"`
	// Seconds is the trace second by second from the header's Start.
	Seconds []Second `json:"seconds"`
}

// Second is one second of a trace.
type Second struct {
	Flows      int64 `json:"flows"`       // kept flows starting in it
	Named      int64 `json:"named"`       // of which named
	ClientHits int64 `json:"client_hits"` // of which client cache hits
	Requests   int64 `json:"requests"`    // requests in it
	// HTTPSBytes is the bytes of the flows active in the second: each
	// flow's bytes spread evenly over its duration, as the paper spread
	// each netflow record's rate (§3.5). A flow with no duration counts
	// whole in its start second.
	HTTPSBytes float64 `json:"https_bytes"`
}

// ScheduleWriter writes a schedule: the header, then requests in time
// order, then targets, then the summary.
type ScheduleWriter struct {
	w     *bufio.Writer
	enc   *json.Encoder
	state int // 0 header due, 1 requests, 2 targets, 3 done
	last  time.Duration
}

// NewScheduleWriter writes h to w and returns a writer for the rest. Call
// Close after the summary to flush.
func NewScheduleWriter(w io.Writer, h ScheduleHeader) (*ScheduleWriter, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	sw := &ScheduleWriter{w: bw, enc: json.NewEncoder(bw)}
	h.Type, h.Version = TypeHeader, ScheduleVersion
	if err := sw.enc.Encode(&h); err != nil {
		return nil, fmt.Errorf("replay: writing schedule header: %w", err)
	}
	sw.state = 1
	return sw, nil
}

// WriteRequest appends a request; requests must come in time order.
func (sw *ScheduleWriter) WriteRequest(r Request) error {
	if sw.state != 1 {
		return errors.New("replay: schedule request after its targets")
	}
	if r.T < sw.last {
		return fmt.Errorf("replay: schedule request at %v after one at %v", r.T, sw.last)
	}
	sw.last = r.T
	r.Type = TypeRequest
	return sw.encode(&r)
}

// WriteTarget appends a target, after every request.
func (sw *ScheduleWriter) WriteTarget(t Target) error {
	if sw.state > 2 {
		return errors.New("replay: schedule target after its summary")
	}
	sw.state = 2
	t.Type = TypeTarget
	return sw.encode(&t)
}

// WriteSummary appends the summary and flushes; nothing may follow.
func (sw *ScheduleWriter) WriteSummary(s ScheduleSummary) error {
	if sw.state > 2 {
		return errors.New("replay: second schedule summary")
	}
	sw.state = 3
	s.Type = TypeSummary
	if err := sw.encode(&s); err != nil {
		return err
	}
	if err := sw.w.Flush(); err != nil {
		return fmt.Errorf("replay: writing schedule: %w", err)
	}
	return nil
}

func (sw *ScheduleWriter) encode(v any) error {
	if err := sw.enc.Encode(v); err != nil {
		return fmt.Errorf("replay: writing schedule: %w", err)
	}
	return nil
}

// MaxScheduleLine bounds one schedule line; the summary's per-second series
// is the longest (about 120 bytes a second: a day is 10 MB).
const MaxScheduleLine = 64 << 20

// ScheduleReader reads a schedule written by ScheduleWriter, checking its
// order as it goes.
type ScheduleReader struct {
	sc      *bufio.Scanner
	Header  ScheduleHeader
	line    int64
	last    time.Duration
	state   int // 1 requests, 2 targets, 3 summary read
	summary *ScheduleSummary
	held    []Target
}

// NewScheduleReader reads the header from r.
func NewScheduleReader(r io.Reader) (*ScheduleReader, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxScheduleLine)
	sr := &ScheduleReader{sc: sc, state: 1}
	typ, line, err := sr.next()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("replay: schedule is empty")
		}
		return nil, err
	}
	if typ != TypeHeader {
		return nil, fmt.Errorf("replay: schedule line 1 is a %q record; a schedule starts with its header", typ)
	}
	if err := json.Unmarshal(line, &sr.Header); err != nil {
		return nil, fmt.Errorf("replay: schedule header: %w", err)
	}
	if sr.Header.Version != ScheduleVersion {
		return nil, fmt.Errorf("replay: schedule version %d; this pkie reads version %d", sr.Header.Version, ScheduleVersion)
	}
	return sr, nil
}

func (sr *ScheduleReader) next() (string, []byte, error) {
	if !sr.sc.Scan() {
		if err := sr.sc.Err(); err != nil {
			return "", nil, fmt.Errorf("replay: schedule line %d: %w", sr.line+1, err)
		}
		return "", nil, io.EOF
	}
	sr.line++
	var t struct {
		Type string `json:"type"`
	}
	b := sr.sc.Bytes()
	if err := json.Unmarshal(b, &t); err != nil {
		return "", nil, fmt.Errorf("replay: schedule line %d: %w", sr.line, err)
	}
	return t.Type, b, nil
}

// Next returns the next request, or io.EOF once the requests end (the
// targets and summary follow: call Rest).
func (sr *ScheduleReader) Next() (Request, error) {
	if sr.state != 1 {
		return Request{}, io.EOF
	}
	typ, b, err := sr.next()
	if err == io.EOF {
		return Request{}, fmt.Errorf("replay: schedule ends at line %d without its summary: cut short", sr.line)
	}
	if err != nil {
		return Request{}, err
	}
	switch typ {
	case TypeRequest:
		var r Request
		if err := json.Unmarshal(b, &r); err != nil {
			return Request{}, fmt.Errorf("replay: schedule line %d: %w", sr.line, err)
		}
		if r.T < sr.last {
			return Request{}, fmt.Errorf("replay: schedule line %d: request at %v after one at %v; requests must be in time order", sr.line, r.T, sr.last)
		}
		if r.Host == "" || r.Port == 0 {
			return Request{}, fmt.Errorf("replay: schedule line %d: request without a host and port", sr.line)
		}
		sr.last = r.T
		return r, nil
	case TypeTarget, TypeSummary:
		sr.state = 2
		if err := sr.take(typ, b); err != nil {
			return Request{}, err
		}
		return Request{}, io.EOF
	}
	return Request{}, fmt.Errorf("replay: schedule line %d: unexpected %q record among requests", sr.line, typ)
}

// take keeps a target or the summary read past the requests.
func (sr *ScheduleReader) take(typ string, b []byte) error {
	if typ == TypeSummary {
		var s ScheduleSummary
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("replay: schedule line %d: %w", sr.line, err)
		}
		sr.summary, sr.state = &s, 3
		return nil
	}
	var t Target
	if err := json.Unmarshal(b, &t); err != nil {
		return fmt.Errorf("replay: schedule line %d: %w", sr.line, err)
	}
	sr.held = append(sr.held, t)
	return nil
}

// Rest reads what follows the requests (skipping any requests not yet
// read) and returns the targets and the summary. A schedule without its
// summary is an error.
func (sr *ScheduleReader) Rest() ([]Target, *ScheduleSummary, error) {
	for sr.state == 1 {
		if _, err := sr.Next(); err != nil && err != io.EOF {
			return nil, nil, err
		}
	}
	for sr.state == 2 {
		typ, b, err := sr.next()
		if err == io.EOF {
			return nil, nil, fmt.Errorf("replay: schedule ends at line %d without its summary: cut short", sr.line)
		}
		if err != nil {
			return nil, nil, err
		}
		if typ != TypeTarget && typ != TypeSummary {
			return nil, nil, fmt.Errorf("replay: schedule line %d: unexpected %q record among targets", sr.line, typ)
		}
		if err := sr.take(typ, b); err != nil {
			return nil, nil, err
		}
	}
	if typ, _, err := sr.next(); err != io.EOF {
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("replay: schedule line %d: %q record after the summary", sr.line, typ)
	}
	t := sr.held
	sr.held = nil
	return t, sr.summary, nil
}
