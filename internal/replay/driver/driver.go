// Package driver replays a request schedule (internal/replay) against
// notaries: the third stage of Forced Perspectives' (IMC 2014) method, §3.3.
// It is open loop: request i leaves at Started + (T_i - From)/Speedup
// whatever is still in flight, as real clients would, so a notary that
// slows down meets the same offered load and its answers pile up rather than
// the load thinning out. Every request to every notary ends in one
// replay.Result of the run record.
package driver

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/netip"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// Defaults of Options.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultMaxInFlight = 20000
	DefaultHosts       = 16
)

// Options configure a replay.
type Options struct {
	// Schedule is read from its current position: the requests, in order.
	// Run stops at its targets (it does not read them).
	Schedule *replay.ScheduleReader
	// Out receives the run record. Header is its header: Run fills in
	// Started, Speedup, Timeout, From, Until and Notaries.
	Out    io.Writer
	Header replay.RunHeader
	// Targets are the notaries: each request goes to every one of them,
	// as a Convergence client asks every notary of its set.
	Targets []Target
	// Speedup divides trace time into wall time; 0 means 1. It must be
	// finite and not negative.
	Speedup float64
	// Timeout is the client's timeout per request; 0 means DefaultTimeout.
	Timeout time.Duration
	// From and Until bound the trace time replayed; Until 0 means to the
	// end.
	From, Until time.Duration
	// MaxInFlight bounds the requests in flight at once; a request due
	// while it is reached is recorded replay.OutcomeNotSent and the
	// schedule goes on. 0 means DefaultMaxInFlight.
	MaxInFlight int
	// Sources are the source addresses simulated clients' requests leave
	// from: the schedule's client addresses are hashed onto them, so a
	// notary's per-client fairness sees several clients rather than one.
	// Empty means the system's choice for every request.
	Sources []netip.Addr
	// NotaryBytes, when set, reports the bytes counted at the notaries'
	// own listeners (NetSample Where "listener"); nil means the bytes of
	// the replayer's connections, summed over the targets that count
	// theirs (Where "client").
	NotaryBytes func() int64
	// NotaryBytesEach, when set, reports the same per notary, in the
	// order of Targets (NetSample.NotaryBytesEach); NotaryBytes is then
	// their sum.
	NotaryBytesEach func() []int64
	// ProbeBytes, when set, reports the bytes of the notaries' probes (a
	// synthetic world's listeners).
	ProbeBytes func() int64
	// Progress, when set, is called about once a wall second.
	Progress func(Progress)
}

// Progress is a replay's state, for a progress line.
type Progress struct {
	Wall    time.Duration // since Started
	Reached time.Duration // trace time of the last request due
	// Sent is the requests sent in the last interval, and Interval its
	// length.
	Sent     int64
	Interval time.Duration
	InFlight int64
	// Lag is how far behind its time the scheduler dispatched the last
	// request. It is not the lag recorded: a request leaves (Result.Sent)
	// only once its goroutine has run and handed it to the transport,
	// which on a loaded machine can be much later; RecentMaxLag and
	// MaxLag are the recorded lags.
	Lag time.Duration
	// RecentMaxLag is the largest lag (Result.Sent behind its due time)
	// of the results recorded in the last interval, and MaxLag the
	// largest of all results so far: what the record and report show.
	RecentMaxLag, MaxLag time.Duration
	// Late counts the results so far that left a trace second or more
	// behind their time (a lag of at least 1s/Speedup of wall time), and
	// TraceSecond is that bound: a replay with any is not faithful at the
	// trace's one-second resolution.
	Late        int64
	TraceSecond time.Duration
	// Counts are the results so far by outcome.
	Counts map[string]int64
}

// Summary is what Run returns: the run's end record and its results by
// outcome.
type Summary struct {
	End    replay.RunEnd
	Counts map[string]int64
	// Results counts every result written.
	Results int64
	// Late counts the results that left a trace second or more behind
	// their time (Progress.Late).
	Late int64
}

// LoopbackSources returns k source addresses 127.0.1.1, 127.0.1.2, …
// (k at most 254): loopback addresses Linux routes without configuration.
func LoopbackSources(k int) []netip.Addr {
	k = max(1, min(k, 254))
	out := make([]netip.Addr, k)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{127, 0, 1, byte(i + 1)})
	}
	return out
}

// Run replays o.Schedule until its requests end, o.Until is reached or ctx
// ends. When ctx ends it stops sending, waits for the requests in flight
// (each ends within the timeout), and writes an end record with
// Interrupted set; it returns the summary and ctx's error. Requests not yet
// due when it stopped are not recorded: RunEnd.Reached says how far the
// replay went.
func Run(ctx context.Context, o Options) (Summary, error) {
	if o.Schedule == nil || o.Out == nil || len(o.Targets) == 0 {
		return Summary{}, errors.New("driver: Options need a Schedule, an Out and at least one Target")
	}
	if o.Speedup == 0 {
		o.Speedup = 1
	}
	if !(o.Speedup > 0) || math.IsInf(o.Speedup, 0) {
		// Checked before the record's header is written: NaN cannot be
		// written as JSON, and ±Inf or a negative speed-up makes every
		// request due at once or never.
		return Summary{}, fmt.Errorf("driver: speed-up %v is not a finite number above 0", o.Speedup)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	h := o.Header
	h.Speedup, h.Timeout, h.From, h.Until = o.Speedup, o.Timeout, o.From, o.Until
	h.Notaries = nil
	for _, t := range o.Targets {
		h.Notaries = append(h.Notaries, t.Name())
	}
	// A short lead so that the first requests are not late by the time it
	// took to start.
	started := time.Now().Add(10 * time.Millisecond).Round(0)
	h.Started = started
	rw, err := replay.NewRecordWriter(o.Out, h)
	if err != nil {
		return Summary{}, err
	}

	r := &run{o: o, started: started, results: make(chan replay.Result, 16384), counts: map[string]int64{},
		jobs: make(chan job), quit: make(chan struct{})}
	writerDone := make(chan error, 1)
	stopWriter := make(chan struct{})
	go func() { writerDone <- r.write(rw, stopWriter) }()

	schedErr := r.schedule(ctx)
	r.inflight.Wait()
	close(r.quit)
	close(stopWriter)
	werr := <-writerDone

	end := replay.RunEnd{
		Interrupted:  ctx.Err() != nil,
		Reached:      time.Duration(r.reached.Load()),
		Wall:         time.Since(started),
		MaxLag:       r.maxLag,
		PeakInFlight: r.peak.Load(),
		PeakHeap:     r.peakHeap,
	}
	sum := Summary{End: end, Counts: r.counts, Results: r.nResults, Late: r.late}
	if werr != nil {
		return sum, werr
	}
	if schedErr != nil {
		// A broken schedule ends the run without an end record: report
		// reads the record as cut short, which it is.
		rw.Flush()
		return sum, schedErr
	}
	if err := rw.WriteEnd(end); err != nil {
		return sum, err
	}
	if end.Interrupted {
		return sum, ctx.Err()
	}
	return sum, nil
}

type run struct {
	o       Options
	started time.Time
	results chan replay.Result
	jobs    chan job      // to idle workers
	quit    chan struct{} // closed when every request has ended

	inflight sync.WaitGroup
	n        atomic.Int64 // in flight now
	peak     atomic.Int64
	reached  atomic.Int64
	lag      atomic.Int64 // of the last request dispatched
	sent     atomic.Int64 // dispatched (not counting not_sent)

	// Owned by the writer goroutine until Run reads them after it ends.
	counts    map[string]int64
	nResults  int64
	maxLag    time.Duration
	recentLag time.Duration // max since the last progress
	late      int64
	peakHeap  uint64
}

// due returns when trace time t leaves, as wall time since started.
func (r *run) due(t time.Duration) time.Duration {
	return time.Duration(float64(t-r.o.From) / r.o.Speedup)
}

func (r *run) source(client netip.Addr) netip.Addr {
	if len(r.o.Sources) == 0 {
		return netip.Addr{}
	}
	f := fnv.New32a()
	b, _ := client.MarshalBinary()
	f.Write(b)
	return r.o.Sources[f.Sum32()%uint32(len(r.o.Sources))]
}

// schedule sends the requests at their times until the schedule ends,
// Until is reached or ctx ends.
func (r *run) schedule(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	// In-flight requests get their own deadline and outlive an
	// interruption: stopping waits for them rather than cutting them off.
	reqCtx := context.WithoutCancel(ctx)
	var seq int64 = -1
	for {
		req, err := r.o.Schedule.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		seq++
		if req.T < r.o.From {
			continue
		}
		if r.o.Until > 0 && req.T >= r.o.Until {
			return nil
		}
		due := r.due(req.T)
		if wait := due - time.Since(r.started); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return nil
		}
		r.reached.Store(int64(req.T))
		now := time.Since(r.started)
		r.lag.Store(int64(now - due))
		src := r.source(req.Client)
		for i, t := range r.o.Targets {
			res := replay.Result{
				Seq: seq, T: req.T, Client: req.Client.String(), Host: req.Host, Port: req.Port, Notary: i,
			}
			if r.n.Load() >= int64(r.o.MaxInFlight) {
				res.Sent, res.Outcome = now, replay.OutcomeNotSent
				res.Error = fmt.Sprintf("the replayer's bound of %d requests in flight was reached", r.o.MaxInFlight)
				r.results <- res
				continue
			}
			if k := r.n.Add(1); k > r.peak.Load() {
				// Only this goroutine raises n, so a plain compare and
				// store cannot lose a peak.
				r.peak.Store(k)
			}
			r.sent.Add(1)
			r.inflight.Add(1)
			r.dispatch(job{ctx: reqCtx, t: t, req: req, src: src, res: res})
		}
	}
}

// job is one request for one notary, handed to a worker.
type job struct {
	ctx context.Context
	t   Target
	req replay.Request
	src netip.Addr
	res replay.Result
}

// dispatch hands j to an idle worker, or starts one: never waits, so the
// loop stays open. Workers outlive their request and take the next, because
// a goroutine per request spent a quarter of a saturated replay's CPU
// growing new stacks to the depth of an HTTP/2 request and having the
// collector scan them (profiled at 10x on the paper's hour); the number of
// workers is bounded by the requests in flight at the peak.
func (r *run) dispatch(j job) {
	select {
	case r.jobs <- j:
	default:
		go r.worker(j)
	}
}

// workerIdle is how long a worker waits for another request before it
// ends.
const workerIdle = 5 * time.Second

func (r *run) worker(j job) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		r.do(j.ctx, j.t, j.req, j.src, j.res)
		idle.Reset(workerIdle)
		select {
		case j = <-r.jobs:
		case <-idle.C:
			return
		case <-r.quit:
			return
		}
	}
}

func (r *run) do(ctx context.Context, t Target, req replay.Request, src netip.Addr, res replay.Result) {
	defer r.inflight.Done()
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	sent := time.Now()
	a := t.Do(ctx, req, src)
	end := time.Now()
	// A request leaves when the target hands it to its transport
	// (Answer.Sent), not when its goroutine starts: what the record
	// calls lag is then the replayer's whole delay, scheduling and
	// preparation both, and latency only what a client would wait for.
	if a.Sent.After(sent) && !a.Sent.After(end) {
		sent = a.Sent
	}
	res.Sent, res.Latency = sent.Sub(r.started), end.Sub(sent)
	res.Outcome, res.Status, res.Cache = a.Outcome, a.Status, a.Cache
	if a.Err != nil {
		res.Error = a.Err.Error()
	}
	// Counted in flight until handed over, so that the bound covers the
	// goroutines waiting on a slow writer too.
	r.results <- res
	r.n.Add(-1)
}

// write is the record's single writer: results as they end, a NetSample
// and a flush each wall second, progress, the heap's peak.
func (r *run) write(rw *replay.RecordWriter, stop <-chan struct{}) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var (
		werr     error
		lastSent int64
		lastTick = time.Now()
	)
	sample := func() {
		metrics.Read(heap)
		if heap[0].Value.Kind() == metrics.KindUint64 {
			r.peakHeap = max(r.peakHeap, heap[0].Value.Uint64())
		}
		if werr != nil {
			return
		}
		s := replay.NetSample{Wall: time.Since(r.started)}
		switch {
		case r.o.NotaryBytesEach != nil:
			s.NotaryBytesEach, s.Where = r.o.NotaryBytesEach(), "listener"
			for _, b := range s.NotaryBytesEach {
				s.NotaryBytes += b
			}
		case r.o.NotaryBytes != nil:
			s.NotaryBytes, s.Where = r.o.NotaryBytes(), "listener"
		default:
			s.Where = "client"
			s.NotaryBytesEach = make([]int64, len(r.o.Targets))
			for i, t := range r.o.Targets {
				if b, ok := t.(interface{ Bytes() int64 }); ok {
					s.NotaryBytesEach[i] = b.Bytes()
					s.NotaryBytes += b.Bytes()
				}
			}
		}
		if r.o.ProbeBytes != nil {
			s.ProbeBytes = r.o.ProbeBytes()
		}
		if err := rw.WriteNet(s); err != nil {
			werr = err
			return
		}
		werr = rw.Flush()
	}
	traceSecond := time.Duration(float64(time.Second) / r.o.Speedup)
	take := func(res replay.Result) {
		r.counts[res.Outcome]++
		r.nResults++
		lag := res.Sent - r.due(res.T)
		r.maxLag = max(r.maxLag, lag)
		r.recentLag = max(r.recentLag, lag)
		if lag >= traceSecond {
			r.late++
		}
		if werr == nil {
			werr = rw.WriteResult(res)
		}
	}
	for {
		select {
		case res := <-r.results:
			take(res)
		case now := <-tick.C:
			sample()
			if r.o.Progress != nil {
				sent := r.sent.Load()
				c := make(map[string]int64, len(r.counts))
				for k, v := range r.counts {
					c[k] = v
				}
				r.o.Progress(Progress{
					Wall: now.Sub(r.started), Reached: time.Duration(r.reached.Load()),
					Sent: sent - lastSent, Interval: now.Sub(lastTick),
					InFlight: r.n.Load(), Lag: time.Duration(r.lag.Load()),
					RecentMaxLag: r.recentLag, MaxLag: r.maxLag, Late: r.late, TraceSecond: traceSecond,
					Counts: c,
				})
				lastSent, lastTick = sent, now
				r.recentLag = 0
			}
		case <-stop:
			// Every sender has finished: drain what they left.
			for {
				select {
				case res := <-r.results:
					take(res)
					continue
				default:
				}
				break
			}
			sample()
			return werr
		}
	}
}
