package replay

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// A run record is the third stage's output and the fourth's input: what
// happened to every request of a schedule replayed against notaries. It is
// JSON lines tagged by "type" like a schedule (docs/formats/notary-and-tools.md, "Run
// records"):
//
//	run      one, first: what was replayed, against what, how fast
//	result   one per request and notary that was due (sent or not), in
//	         the order they ended
//	net      each wall second, the bytes counted so far at the notaries'
//	         listeners (or the replayer's connections to remote ones) and
//	         at the synthetic world's
//	end      one, last, when the run ended cleanly (finished or stopped)
//
// A record without its end was killed; report reads what it has and says
// so.

// RecordVersion is the run record format's version.
const RecordVersion = 1

// RunHeader opens a run record.
type RunHeader struct {
	Type    string `json:"type"` // TypeRun
	Version int    `json:"version"`
	// Schedule is the schedule's path and its header.
	Schedule       string         `json:"schedule"`
	ScheduleHeader ScheduleHeader `json:"schedule_header"`
	// API is the notary API the requests used: "convergence" or "v1"
	// (a PEC cloud target would add its own).
	API string `json:"api"`
	// Notaries names each notary requests went to, in the record's
	// Result.Notary numbering.
	Notaries []string `json:"notaries"`
	// Speedup is how much faster than the trace the requests left: trace
	// time T left at wall time T/Speedup after Started.
	Speedup float64 `json:"speedup"`
	// Timeout is the client's timeout per request.
	Timeout time.Duration `json:"timeout_ns"`
	// From and Until bound the trace time replayed (Until 0: to the end).
	From  time.Duration `json:"from_ns,omitempty"`
	Until time.Duration `json:"until_ns,omitempty"`
	// Started is the wall time of trace time From.
	Started time.Time `json:"started"`
	// Local says the notaries ran in this process against a synthetic
	// world, with its settings; empty for remote notaries.
	Local string `json:"local,omitempty"`
	// Conns says how requests used connections to the notaries: "reuse"
	// (pooled keep-alive connections per simulated source address, so
	// most requests carry no TLS handshake) or "fresh" (a new TLS
	// connection per request, as a client checking one certificate per
	// connection would open, so the notaries' bytes include a handshake
	// per request). Empty in records written before the field: "reuse".
	Conns string `json:"conns,omitempty"`
}

// Connection modes of RunHeader.Conns.
const (
	ConnsReuse = "reuse"
	ConnsFresh = "fresh"
)

// Outcomes of a request, as Table 1 of Forced Perspectives groups them.
const (
	// OutcomeOK: the notary answered 200 (it vouches for the
	// certificate). The paper's notary answered 202 for this.
	OutcomeOK = "ok"
	// OutcomeConflict: 409, the notary sees another certificate.
	OutcomeConflict = "conflict"
	// OutcomeUnavailable: 503, the notary could not reach the target or
	// was overloaded (Status and Error say which).
	OutcomeUnavailable = "unavailable"
	// OutcomeStatus: any other HTTP status.
	OutcomeStatus = "status"
	// OutcomeConnError: no HTTP answer: the connection to the notary
	// failed or broke.
	OutcomeConnError = "conn_error"
	// OutcomeTimeout: the client's timeout expired first.
	OutcomeTimeout = "timeout"
	// OutcomeNotSent: the replayer could not send it: its own bound on
	// requests in flight was full. (A stopped run records nothing for the
	// requests not yet due.) A run with any is not a faithful replay;
	// report says so.
	OutcomeNotSent = "not_sent"
)

// Notary cache conditions of an answered request.
const (
	CacheHit  = "hit"  // answered from what the notary had seen before
	CacheMiss = "miss" // the notary probed the target for this request
)

// Result is what happened to one request.
type Result struct {
	Type string `json:"type"` // TypeResult
	// Seq is the request's index in the schedule (from 0).
	Seq int64 `json:"seq"`
	// T is the request's trace time; Sent is when it left, as wall time
	// since RunHeader.Started (its lag is Sent - (T-From)/Speedup, From
	// being RunHeader.From).
	T    time.Duration `json:"t_ns"`
	Sent time.Duration `json:"sent_ns"`
	// Latency is from leaving to the last byte of the answer (or the
	// error).
	Latency time.Duration `json:"latency_ns"`
	Client  string        `json:"client"`
	Host    string        `json:"host"`
	Port    uint16        `json:"port"`
	Notary  int           `json:"notary"` // index into RunHeader.Notaries
	Outcome string        `json:"outcome"`
	Status  int           `json:"status,omitempty"` // HTTP status, when answered
	// Cache is CacheHit or CacheMiss when the answer says (v1's "probed")
	// or shows (a Convergence answer whose newest observation ends before
	// the request left, at the answer's one-second resolution); empty
	// when unknown.
	Cache string `json:"cache,omitempty"`
	// Error says what failed, for every outcome but ok and conflict.
	Error string `json:"error,omitempty"`
}

// NetSample is the cumulative bytes counted at the notaries' listeners (both
// ways, TCP payload: TLS records and all, not IP and TCP headers) and at the
// synthetic world's listeners (the notaries' probes), at a wall time since
// RunHeader.Started.
type NetSample struct {
	Type string        `json:"type"` // TypeNet
	Wall time.Duration `json:"wall_ns"`
	// NotaryBytes is the sum over the notaries; NotaryBytesEach, when
	// present, has one count per RunHeader.Notaries, in that order:
	// Forced Perspectives' overhead (IMC 2014, §3.5) is one notary's
	// bytes over the trace's, so with several notaries the sum is not
	// it. Records without it (one notary, or older ones) have the sum
	// only.
	NotaryBytes     int64   `json:"notary_bytes"`
	NotaryBytesEach []int64 `json:"notary_bytes_each,omitempty"`
	ProbeBytes      int64   `json:"probe_bytes"`
	// Where says where NotaryBytes was counted: "listener" (a local
	// notary's) or "client" (the replayer's connections, for remote
	// notaries).
	Where string `json:"where"`
}

// RunEnd closes a run record.
type RunEnd struct {
	Type string `json:"type"` // TypeEnd
	// Interrupted says the run was stopped (Ctrl-C) before the schedule's
	// end; Reached is the trace time it had reached.
	Interrupted bool          `json:"interrupted,omitempty"`
	Reached     time.Duration `json:"reached_ns"`
	Wall        time.Duration `json:"wall_ns"`
	// MaxLag is the most any request left behind its time; a replay that
	// keeps up has it small beside the trace's seconds.
	MaxLag time.Duration `json:"max_lag_ns"`
	// PeakInFlight is the most requests in flight at once.
	PeakInFlight int64 `json:"peak_in_flight"`
	// PeakHeap is the Go heap's peak, sampled, in bytes.
	PeakHeap uint64 `json:"peak_heap_bytes,omitempty"`
}

// RecordWriter writes a run record. It is not safe for concurrent use.
type RecordWriter struct {
	w   *bufio.Writer
	enc *json.Encoder
}

// NewRecordWriter writes h to w.
func NewRecordWriter(w io.Writer, h RunHeader) (*RecordWriter, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	rw := &RecordWriter{w: bw, enc: json.NewEncoder(bw)}
	h.Type, h.Version = TypeRun, RecordVersion
	if err := rw.enc.Encode(&h); err != nil {
		return nil, fmt.Errorf("replay: writing run record: %w", err)
	}
	return rw, nil
}

// WriteResult appends a result.
func (rw *RecordWriter) WriteResult(r Result) error {
	r.Type = TypeResult
	return rw.encode(&r)
}

// WriteNet appends a byte count sample.
func (rw *RecordWriter) WriteNet(s NetSample) error {
	s.Type = TypeNet
	return rw.encode(&s)
}

// WriteEnd appends the end and flushes.
func (rw *RecordWriter) WriteEnd(e RunEnd) error {
	e.Type = TypeEnd
	if err := rw.encode(&e); err != nil {
		return err
	}
	return rw.Flush()
}

// Flush writes out what is buffered; a run flushes now and then so that a
// killed run loses little.
func (rw *RecordWriter) Flush() error {
	if err := rw.w.Flush(); err != nil {
		return fmt.Errorf("replay: writing run record: %w", err)
	}
	return nil
}

func (rw *RecordWriter) encode(v any) error {
	if err := rw.enc.Encode(v); err != nil {
		return fmt.Errorf("replay: writing run record: %w", err)
	}
	return nil
}

// ReadRecord reads a run record, calling result for each result and net for
// each sample (either may be nil). It returns the header and the end (nil
// when the record has none: the run was killed). A last line cut short by
// the kill is ignored; any other malformed line is an error.
func ReadRecord(r io.Reader, result func(Result) error, net func(NetSample) error) (*RunHeader, *RunEnd, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxScheduleLine)
	var (
		h       *RunHeader
		end     *RunEnd
		line    int64
		badLast error
	)
	for sc.Scan() {
		line++
		if badLast != nil {
			return nil, nil, badLast
		}
		b := sc.Bytes()
		var t struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &t); err != nil {
			// Only the very last line may be cut short.
			badLast = fmt.Errorf("replay: run record line %d: %w", line, err)
			continue
		}
		if h == nil && t.Type != TypeRun {
			return nil, nil, fmt.Errorf("replay: run record line %d is a %q record; a run record starts with its run header", line, t.Type)
		}
		if end != nil {
			return nil, nil, fmt.Errorf("replay: run record line %d: %q record after the end", line, t.Type)
		}
		var err error
		switch t.Type {
		case TypeRun:
			if h != nil {
				return nil, nil, fmt.Errorf("replay: run record line %d: second run header", line)
			}
			h = new(RunHeader)
			if err = json.Unmarshal(b, h); err == nil && h.Version != RecordVersion {
				err = fmt.Errorf("version %d; this pkie reads version %d", h.Version, RecordVersion)
			}
		case TypeResult:
			var res Result
			if err = json.Unmarshal(b, &res); err == nil && result != nil {
				if err = result(res); err != nil {
					return nil, nil, err
				}
			}
		case TypeNet:
			var s NetSample
			err = json.Unmarshal(b, &s)
			if err == nil && s.NotaryBytesEach != nil && len(s.NotaryBytesEach) != len(h.Notaries) {
				err = fmt.Errorf("net sample counts the bytes of %d notaries; the run header names %d", len(s.NotaryBytesEach), len(h.Notaries))
			}
			if err == nil && net != nil {
				if err = net(s); err != nil {
					return nil, nil, err
				}
			}
		case TypeEnd:
			end = new(RunEnd)
			err = json.Unmarshal(b, end)
		default:
			err = fmt.Errorf("unknown record type %q", t.Type)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("replay: run record line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("replay: run record line %d: %w", line+1, err)
	}
	if h == nil {
		return nil, nil, errors.New("replay: run record is empty")
	}
	if badLast != nil && end != nil {
		return nil, nil, badLast
	}
	return h, end, nil
}
