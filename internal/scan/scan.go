// Package scan collects the certificate chains of a list of sites, the way
// the thesis behind pkie's measurement toolkit gathered the chains of the
// top 500,000 Alexa sites to ask which root CAs the web really needs.
//
// A scan streams: sites are read from the list one at a time, probed by a
// bounded pool of workers and written as JSON lines as they finish, so its
// memory does not grow with the list. The output file is also the scan's
// checkpoint: scanning again with the same file skips the sites it already
// records, and a file cut off mid-record (the scanner killed) is trimmed back
// to its last whole record before the scan resumes.
package scan

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/probe"
)

// Options configure a scan. The zero value scans port 443 with 50 workers,
// one retry and no rate limit.
type Options struct {
	// Probe configures the prober (per-attempt Timeout, Lookup,
	// AllowPrivate, Vantage).
	Probe probe.Options
	// Port is the TCP port to scan (default 443).
	Port int
	// Concurrency is the number of sites probed at once (default 50).
	Concurrency int
	// Retries is how many times a failed site is tried again (default 1;
	// negative means none). A site whose address the
	// private-address guard forbids (probe.ErrForbiddenAddress) is never
	// retried; a refused connection is.
	Retries int
	// Backoff is the wait before the first retry, doubled for each later
	// one, with up to 50% jitter (default 500 ms).
	Backoff time.Duration
	// Rate caps connection attempts per second across all workers; 0 means
	// no cap.
	Rate float64
	// Skip, if set, names sites already recorded (resumption).
	Skip func(domain string) bool
	// Progress, if set, receives a status line every ProgressEvery
	// (default 1 s) and one at the end.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Total is the number of sites in the list, for the ETA; 0 if unknown.
	Total int
	// FlushEvery bounds how long finished records sit in the output buffer
	// (default 1 s): what a killed scanner loses and must redo.
	FlushEvery time.Duration
}

// Source yields sites; *ListReader is one. Next returns io.EOF at the end.
type Source interface {
	Next() (Site, error)
}

// Summary counts what a scan did.
type Summary struct {
	Sites    int            `json:"sites"`   // sites taken from the list (skipped ones included)
	Skipped  int            `json:"skipped"` // already recorded: not scanned again
	Scanned  int            `json:"scanned"` // probed in this run
	OK       int            `json:"ok"`      // answered with a chain
	Failed   int            `json:"failed"`
	Attempts int            `json:"attempts"` // connection attempts, retries included
	Errors   map[string]int `json:"errors"`   // failures by kind
	Elapsed  time.Duration  `json:"elapsed_ns"`
	// PerSecond is sites scanned per second of this run.
	PerSecond float64 `json:"sites_per_second"`
}

// Run scans every site src yields and writes one Record per site to out as
// a JSON line. It returns when the list is exhausted or ctx is done (then
// with ctx's error); records finished by then are written either way.
func Run(ctx context.Context, src Source, out io.Writer, o Options) (Summary, error) {
	if o.Port == 0 {
		o.Port = 443
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 50
	}
	if o.Retries == 0 {
		o.Retries = 1
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = time.Second
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = time.Second
	}
	prober := probe.New(o.Probe)
	lim := newLimiter(o.Rate)
	start := time.Now()

	sites := make(chan Site, o.Concurrency)
	results := make(chan Record, o.Concurrency)
	var srcErr error
	sum := Summary{Errors: map[string]int{}}
	var nSites, nSkipped atomic.Int64 // written by the producer

	// Producer: streams the list, dropping sites already recorded.
	go func() {
		defer close(sites)
		for {
			s, err := src.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				srcErr = err
				return
			}
			nSites.Add(1)
			if o.Skip != nil && o.Skip(s.Domain) {
				nSkipped.Add(1)
				continue
			}
			select {
			case sites <- s:
			case <-ctx.Done():
				return
			}
		}
	}()

	var wg sync.WaitGroup
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range sites {
				if ctx.Err() != nil {
					continue // drain without probing
				}
				rec, ok := scanOne(ctx, prober, lim, s, o)
				if !ok {
					continue // cancelled mid-site: record nothing, the resume redoes it
				}
				results <- rec
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()

	w := bufio.NewWriterSize(out, 256<<10)
	var werr error
	flush := time.NewTicker(o.FlushEvery)
	defer flush.Stop()
	tick := time.NewTicker(o.ProgressEvery)
	defer tick.Stop()
	progress := func(final bool) {
		sum.Sites, sum.Skipped = int(nSites.Load()), int(nSkipped.Load())
		if o.Progress != nil {
			printProgress(o.Progress, &sum, o.Total, time.Since(start), final)
		}
	}
loop:
	for {
		select {
		case rec, more := <-results:
			if !more {
				break loop
			}
			sum.Scanned++
			sum.Attempts += rec.Attempts
			if rec.OK() {
				sum.OK++
			} else {
				sum.Failed++
				kind, _, _ := strings.Cut(rec.Error, ":")
				sum.Errors[kind]++
			}
			if werr == nil {
				b, err := json.Marshal(&rec)
				if err == nil {
					b = append(b, '\n')
					_, err = w.Write(b)
				}
				werr = err
			}
		case <-flush.C:
			if werr == nil {
				werr = w.Flush()
			}
		case <-tick.C:
			progress(false)
		}
	}
	if werr == nil {
		werr = w.Flush()
	}
	sum.Elapsed = time.Since(start)
	if s := sum.Elapsed.Seconds(); s > 0 {
		sum.PerSecond = float64(sum.Scanned) / s
	}
	progress(true)
	switch {
	case werr != nil:
		return sum, fmt.Errorf("writing scan records: %w", werr)
	case srcErr != nil:
		return sum, fmt.Errorf("reading site list: %w", srcErr)
	case ctx.Err() != nil:
		return sum, ctx.Err()
	}
	return sum, nil
}

// scanOne probes one site with retries. It returns false if ctx ended
// first: the site is then left unrecorded, for a resumed scan to redo.
func scanOne(ctx context.Context, p *probe.Prober, lim *limiter, s Site, o Options) (Record, bool) {
	rec := Record{Rank: s.Rank, Domain: s.Domain, Port: o.Port, Vantage: o.Probe.Vantage}
	var err error
	for attempt := 0; ; attempt++ {
		if werr := lim.wait(ctx); werr != nil {
			return rec, false
		}
		rec.Attempts++
		var obs *probe.Observation
		t := probe.Target{Host: s.Domain, Port: o.Port}
		if a, perr := netip.ParseAddr(s.Domain); perr == nil {
			t.IP = a
		}
		obs, err = p.Probe(ctx, t)
		// Record where the probe went, the port included: with a
		// resolver override it need not be the one asked for.
		var ae *probe.AddrError
		if err == nil {
			rec.IP, rec.Port = obs.Addr.Addr().String(), int(obs.Addr.Port())
			rec.Time = obs.Time.UTC()
			rec.Chain = obs.Chain
			rec.Error = ""
			return rec, true
		}
		if errors.As(err, &ae) {
			rec.IP, rec.Port = ae.Addr.Addr().String(), int(ae.Addr.Port())
		}
		if ctx.Err() != nil {
			return rec, false
		}
		if attempt >= o.Retries || !retryable(err) {
			break
		}
		d := o.Backoff << attempt
		d += time.Duration(rand.Int64N(int64(d)/2 + 1))
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return rec, false
		}
	}
	rec.Time = time.Now().UTC()
	rec.Error = ErrorKind(err) + ": " + err.Error()
	rec.Chain = [][]byte{}
	return rec, true
}

func retryable(err error) bool {
	return !errors.Is(err, probe.ErrForbiddenAddress)
}

// ErrorKind names the class of a probe error: timeout, resolve, connect,
// handshake, forbidden or other. Scan records' errors start with it.
func ErrorKind(err error) string {
	switch {
	case errors.Is(err, probe.ErrForbiddenAddress):
		return "forbidden"
	case errors.Is(err, probe.ErrTimeout):
		return "timeout"
	case errors.Is(err, probe.ErrResolve):
		return "resolve"
	case errors.Is(err, probe.ErrConnect):
		return "connect"
	case errors.Is(err, probe.ErrHandshake):
		return "handshake"
	}
	return "other"
}

func printProgress(w io.Writer, s *Summary, total int, el time.Duration, final bool) {
	rate := 0.0
	if el > 0 {
		rate = float64(s.Scanned) / el.Seconds()
	}
	done := s.Scanned + s.Skipped
	line := fmt.Sprintf("scan: %d", done)
	if total > 0 {
		line += fmt.Sprintf("/%d (%.1f%%)", total, 100*float64(done)/float64(total))
	}
	line += fmt.Sprintf(" sites, %.1f/s, ok %d, failed %d", rate, s.OK, s.Failed)
	if s.Skipped > 0 {
		line += fmt.Sprintf(", skipped %d", s.Skipped)
	}
	if total > 0 && rate > 0 && !final {
		eta := time.Duration(float64(total-done) / rate * float64(time.Second))
		line += ", ETA " + eta.Round(time.Second).String()
	}
	if final {
		line += fmt.Sprintf(", done in %s", el.Round(time.Millisecond))
	}
	fmt.Fprintln(w, line)
}

// limiter spaces attempts 1/rate apart across all workers.
type limiter struct {
	mu       sync.Mutex
	interval time.Duration
	next     time.Time
}

func newLimiter(rate float64) *limiter {
	if rate <= 0 {
		return nil
	}
	return &limiter{interval: time.Duration(float64(time.Second) / rate)}
}

func (l *limiter) wait(ctx context.Context) error {
	if l == nil {
		return ctx.Err()
	}
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	at := l.next
	l.next = l.next.Add(l.interval)
	l.mu.Unlock()
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return ctx.Err()
}
