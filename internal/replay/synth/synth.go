// Package synth turns a trace's flows into the requests a deployment of
// notaries would have received: the second stage of "Forced Perspectives"
// (IMC 2014, §3.1–§3.2). Each flow's server is named (the trace's SNI, a
// mapping file, or reverse DNS, in a chosen order); flows are put back in
// time order within a reorder window; each client's own cache is simulated,
// so only a (client, host, port) not in it issues a request; and the
// result is written as a replay schedule with its targets and a summary
// counting what was named, lost, cached and requested, second by second.
package synth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// Counts says whether a trace's flows counted packets both ways, which
// decides whether a target whose server never answered can be marked dead.
type Counts int

const (
	// CountsAuto takes the trace to count both ways if any of its flows
	// has a packet from the server: one-way netflow never does.
	CountsAuto Counts = iota
	// CountsBothWays is for formats that always count both ways (Zeek
	// conn.log, pcap).
	CountsBothWays
	// CountsOneWay never marks a target dead from the trace.
	CountsOneWay
)

// Defaults of Config's bounds.
const (
	DefaultReorder    = 5 * time.Minute
	DefaultCacheMax   = 1 << 21
	DefaultTargetsMax = 1 << 20
	// DefaultMaxSpan bounds the trace's length: the summary's per-second
	// series of five days is about 50 MB, under replay.MaxScheduleLine.
	DefaultMaxSpan = 5 * 24 * time.Hour
)

// Config says how a schedule is made.
type Config struct {
	// Source goes in the schedule header: the trace's path and format, or
	// the generator and its parameters.
	Source string
	// Naming lists the naming methods tried in order: MethodSNI, MethodMap,
	// MethodRDNS. The first that names a flow's server wins.
	Naming []string
	// Map and RDNS name server addresses for MethodMap and MethodRDNS.
	Map, RDNS Namer
	// Compare, with an address method configured, counts the flows the SNI
	// named whose address had no name (ScheduleSummary.SNIRecovered).
	Compare bool
	// Reorder is how far out of time order flows may arrive (readers emit
	// them as connections end, not as they start). Zero means
	// DefaultReorder; negative means none.
	Reorder time.Duration
	// CacheLifetime is how long a client's cache entry lasts from the
	// request that filled it; zero means the whole trace, as in the paper.
	CacheLifetime time.Duration
	// CacheMax bounds the cache entries of all clients together; past it
	// the least recently used is evicted. Zero means DefaultCacheMax.
	CacheMax int
	// TargetsMax bounds the distinct (host, port) targets; past it Run
	// fails with ErrTooManyTargets. Zero means DefaultTargetsMax.
	TargetsMax int
	// MaxSpan bounds the time from the first flow's start to the last
	// one's end. Zero means DefaultMaxSpan.
	MaxSpan time.Duration
	// Counts says whether the trace counted packets both ways.
	Counts Counts
	// Dead, if not nil, marks hosts dead whatever the trace says.
	Dead DeadSet
}

// ErrTooManyTargets is returned when a trace names more distinct targets
// than Config.TargetsMax.
var ErrTooManyTargets = errors.New("synth: too many distinct targets")

// ErrSpan is returned when a trace lasts longer than Config.MaxSpan.
var ErrSpan = errors.New("synth: trace too long")

func (cfg *Config) check() error {
	if len(cfg.Naming) == 0 {
		return errors.New("synth: no naming method")
	}
	seen := map[string]bool{}
	for _, m := range cfg.Naming {
		switch m {
		case MethodSNI:
		case MethodMap:
			if cfg.Map == nil {
				return errors.New("synth: naming by map without a map")
			}
		case MethodRDNS:
			if cfg.RDNS == nil {
				return errors.New("synth: naming by reverse DNS without its answers")
			}
		default:
			return fmt.Errorf("synth: unknown naming method %q (want sni, map or rdns)", m)
		}
		if seen[m] {
			return fmt.Errorf("synth: naming method %q listed twice", m)
		}
		seen[m] = true
	}
	return nil
}

// Result is what Run counts: the schedule's summary, and what it does not
// hold.
type Result struct {
	replay.ScheduleSummary
	// CompareUnmeasured counts flows the SNI named whose address was never
	// looked up (past the reverse-DNS bound, or the lookup failed): neither
	// recovered nor not.
	CompareUnmeasured int64 `json:"compare_unmeasured,omitempty"`
}

// Synth makes one schedule. It is not safe for concurrent use; Progress
// may be called between reads of the trace (from the reader's goroutine).
type Synth struct {
	cfg     Config
	res     Result
	named   int64
	heap    flowHeap
	seq     uint64
	newest  int64 // newest start seen, ns since the epoch
	edge    int64 // start of the last flow released
	started bool
	start   int64 // header's Start
	sw      *replay.ScheduleWriter
	w       io.Writer
	cache   *clientCache
	targets map[string]*target // by replay.TargetKey
	series  series
	// bothWays is set once a flow shows packets from its server.
	bothWays bool
}

// New returns a Synth for cfg.
func New(cfg Config) (*Synth, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Reorder == 0 {
		cfg.Reorder = DefaultReorder
	} else if cfg.Reorder < 0 {
		cfg.Reorder = 0
	}
	if cfg.CacheMax <= 0 {
		cfg.CacheMax = DefaultCacheMax
	}
	if cfg.TargetsMax <= 0 {
		cfg.TargetsMax = DefaultTargetsMax
	}
	if cfg.MaxSpan <= 0 {
		cfg.MaxSpan = DefaultMaxSpan
	}
	s := &Synth{
		cfg:     cfg,
		cache:   newClientCache(cfg.CacheLifetime, cfg.CacheMax),
		targets: map[string]*target{},
	}
	s.res.SNIRecovered = -1
	if cfg.Compare && slices.Contains(cfg.Naming, MethodSNI) &&
		(slices.Contains(cfg.Naming, MethodMap) || slices.Contains(cfg.Naming, MethodRDNS)) {
		s.res.SNIRecovered = 0
	}
	return s, nil
}

// Progress reports the flows read so far and how many were named.
func (s *Synth) Progress() (flows, named int64) { return s.res.Flows, s.named }

// pending is a flow waiting in the reorder window, named.
type pending struct {
	start    int64 // ns since the epoch
	seq      uint64
	dur      time.Duration
	client   netip.Addr
	host     string
	port     uint16
	bytes    float64
	noAnswer bool // packets out and none back
}

// Run reads r to its end and writes the schedule to w. When ctx ends or r
// fails it returns the error with the schedule incomplete (no summary).
func (s *Synth) Run(ctx context.Context, r replay.Reader, w io.Writer) (Result, error) {
	s.w = w
	for {
		if err := ctx.Err(); err != nil {
			return s.res, err
		}
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s.res, err
		}
		if err := s.add(&f); err != nil {
			return s.res, err
		}
	}
	for s.heap.Len() > 0 {
		if err := s.release(s.heap.pop()); err != nil {
			return s.res, err
		}
	}
	if err := s.header(); err != nil {
		return s.res, err
	}
	return s.finish(r.Stats())
}

// name names f's server as the configuration says, counting how.
func (s *Synth) name(f *replay.Flow) string {
	host, how := "", ""
	// The address counts as without a name only if every address method
	// answered for it and none named it.
	addrNamed, addrLooked := false, true
	for _, m := range s.cfg.Naming {
		var n string
		var ok bool
		switch m {
		case MethodSNI:
			if f.ServerName != "" {
				if h, err := CanonicalName(f.ServerName); err == nil {
					n, ok = h, true
				}
			}
		case MethodMap, MethodRDNS:
			nm := s.cfg.Map
			if m == MethodRDNS {
				nm = s.cfg.RDNS
			}
			n, ok = nm.Name(f.Server)
			if l, isL := nm.(Looker); isL && !l.Looked(f.Server) {
				addrLooked = false
			}
			if ok {
				addrNamed = true
			}
		}
		if ok && host == "" {
			host, how = n, m
			if !s.cfg.Compare || how != MethodSNI || addrNamed {
				break
			}
		}
	}
	switch how {
	case MethodSNI:
		s.res.NamedSNI++
		if s.res.SNIRecovered >= 0 && !addrNamed {
			if addrLooked {
				s.res.SNIRecovered++
			} else {
				s.res.CompareUnmeasured++
			}
		}
	case MethodMap:
		s.res.NamedMap++
	case MethodRDNS:
		s.res.NamedRDNS++
	default:
		s.res.Unnamed++
	}
	return host
}

func (s *Synth) add(f *replay.Flow) error {
	s.res.Flows++
	host := s.name(f)
	if host != "" {
		s.named++
	}
	if f.PacketsIn > 0 {
		s.bothWays = true
	}
	p := pending{
		start:    f.Start.UnixNano(),
		dur:      max(f.Duration, 0),
		client:   f.Client.Unmap(),
		host:     host,
		port:     f.Port,
		bytes:    float64(f.BytesIn) + float64(f.BytesOut),
		noAnswer: f.PacketsOut > 0 && f.PacketsIn == 0,
	}
	s.seq++
	p.seq = s.seq
	if s.started && p.start < s.edge {
		// Later than the window allowed: the schedule is already past
		// its time, so it takes the window's edge.
		s.res.Late++
		p.start = s.edge
	}
	s.heap.push(p)
	if p.start > s.newest || s.res.Flows == 1 {
		s.newest = p.start
	}
	limit := s.newest - int64(s.cfg.Reorder)
	for s.heap.Len() > 0 && s.heap.min().start <= limit {
		if err := s.release(s.heap.pop()); err != nil {
			return err
		}
	}
	return nil
}

// header writes the schedule header once the first flow is released (its
// start is the schedule's origin), or at the end of an empty trace.
func (s *Synth) header() error {
	if s.sw != nil {
		return nil
	}
	h := replay.ScheduleHeader{
		Source:        s.cfg.Source,
		Naming:        s.cfg.Naming,
		CacheLifetime: s.cfg.CacheLifetime,
	}
	if s.started {
		h.Start = time.Unix(0, s.start).UTC()
	}
	sw, err := replay.NewScheduleWriter(s.w, h)
	if err != nil {
		return err
	}
	s.sw = sw
	return nil
}

// release takes p, the earliest flow left, in time order.
func (s *Synth) release(p pending) error {
	if !s.started {
		s.started, s.start = true, p.start
	}
	s.edge = p.start
	if err := s.header(); err != nil {
		return err
	}
	t := time.Duration(p.start - s.start)
	if t+p.dur > s.cfg.MaxSpan {
		return fmt.Errorf("%w: a flow at %v lasting %v ends past the %v bound", ErrSpan, t, p.dur, s.cfg.MaxSpan)
	}
	// addBytes may grow the series: take the second after it.
	s.series.addBytes(t, p.dur, p.bytes)
	sec := s.series.at(t)
	sec.Flows++
	s.res.HTTPSBytes += p.bytes
	if p.host == "" {
		return nil
	}
	sec.Named++
	k := replay.TargetKey(p.host, p.port)
	tg := s.targets[k]
	if tg == nil {
		if len(s.targets) >= s.cfg.TargetsMax {
			return fmt.Errorf("%w: more than %d", ErrTooManyTargets, s.cfg.TargetsMax)
		}
		tg = &target{host: p.host, port: p.port, allNoAnswer: true}
		s.targets[k] = tg
	}
	tg.flows++
	if !p.noAnswer {
		tg.allNoAnswer = false
	}
	if s.cache.hit(cacheKey{p.client, p.host, p.port}, t, !p.noAnswer, s.countsBothWays()) {
		sec.ClientHits++
		s.res.ClientCacheHits++
		return nil
	}
	tg.requests++
	sec.Requests++
	s.res.Requests++
	return s.sw.WriteRequest(replay.Request{T: t, Client: p.client, Host: p.host, Port: p.port})
}

func (s *Synth) finish(st replay.Stats) (Result, error) {
	keys := make([]*target, 0, len(s.targets))
	for _, tg := range s.targets {
		keys = append(keys, tg)
	}
	slices.SortFunc(keys, func(a, b *target) int {
		if c := strings.Compare(a.host, b.host); c != 0 {
			return c
		}
		return int(a.port) - int(b.port)
	})
	bothWays := s.countsBothWays()
	for _, tg := range keys {
		dead := bothWays && tg.allNoAnswer || s.cfg.Dead != nil && s.cfg.Dead.Dead(tg.host)
		if dead {
			s.res.DeadTargets++
		}
		if err := s.sw.WriteTarget(replay.Target{Host: tg.host, Port: tg.port, Flows: tg.flows, Requests: tg.requests, Dead: dead}); err != nil {
			return s.res, err
		}
	}
	s.res.Targets = int64(len(keys))
	s.res.CacheEvicted = s.cache.evicted
	s.res.Trace = st
	s.res.Seconds = s.series.done()
	if err := s.sw.WriteSummary(s.res.ScheduleSummary); err != nil {
		return s.res, err
	}
	return s.res, nil
}

// countsBothWays reports whether the trace counts packets both ways, so
// that a flow with packets out and none back was really unanswered. With
// CountsAuto it holds once any flow read so far, up to the reorder window
// ahead of the one being released, had a packet back.
func (s *Synth) countsBothWays() bool {
	return s.cfg.Counts == CountsBothWays || s.cfg.Counts == CountsAuto && s.bothWays
}

type target struct {
	host            string
	port            uint16
	flows, requests int64
	// allNoAnswer holds while every flow to the target sent packets and
	// got none back.
	allNoAnswer bool
}
