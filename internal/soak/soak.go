// Package soak runs a notary and a CT log, in process on loopback, under a
// bounded mix of good and hostile traffic and reports how the good traffic
// fared: per service the requests sent, the share that succeeded and their
// latency, and per attack what it achieved.
//
// The services are the real ones, built with the same constructors as
// "pkie notary serve" and "pkie log serve" (through package testbed for the
// notary), so a soak measures whatever bounds the code has today. Good
// traffic comes at a fixed rate from 127.0.0.1, open loop: a slow answer does
// not slow the sender, so an attack that stalls the services shows up as
// latency and failures rather than as fewer requests. Each attack of docs/operations/security.md
// is its own generator and comes from its own loopback address (127.0.0.2,
// 127.0.0.3, …), so that bounds per client address can tell it from the good
// client.
//
// The run is split into phases: a baseline without attacks, each selected
// attack alone, all of them together, and a recovery phase. Every generator
// is bounded in connections, requests in flight and request rate, and stops
// with its phase; the whole run stops after Options.Duration.
package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Attack names, as --attacks takes them.
const (
	AttackH2SlowBodies = "h2-slow-bodies"
	AttackSlowAddChain = "slow-add-chain"
	AttackProbeFlood   = "probe-flood"
	AttackIdleConns    = "idle-conns"
	AttackPoison       = "v1-poison"
	AttackMalformed    = "malformed" // malformed bodies and paths
)

// Attacks lists every attack in the order the phases run them. The probe
// flood comes last: probes it queued outlive its requests (for as long as
// the queue takes to drain), and would otherwise spill into the next
// attack's phase.
var Attacks = []string{AttackPoison, AttackMalformed, AttackIdleConns, AttackH2SlowBodies, AttackSlowAddChain, AttackProbeFlood}

// attackInfo says what each attack is, for the report.
var attackInfo = map[string]struct{ target, what string }{
	AttackH2SlowBodies: {"notary", "HTTP/2 streams with content-length and no body"},
	AttackSlowAddChain: {"log", "add-chain bodies trickled one byte a second"},
	AttackProbeFlood:   {"notary", "v1 checks with distinct SNIs of a target that never answers TLS"},
	AttackIdleConns:    {"notary+log", "idle connections held open"},
	AttackPoison:       {"notary", "v1 checks pinned to the attacker's address under a victim's name"},
	AttackMalformed:    {"notary+log", "malformed bodies, queries and paths"},
}

// Scale sets the size of each attack. The zero value of a field means the
// size the issue reported the attack at (or a few hundred connections for
// the idle flood, see IdleConns).
type Scale struct {
	H2Conns      int // TLS connections of the HTTP/2 slow-body attack; 0 means 18
	H2Streams    int // streams per connection; 0 means 250 (capped by what the server advertises)
	SlowBodies   int // concurrent slow add-chain requests; 0 means 70
	FloodWorkers int // concurrent probe-flood requests; 0 means 400
	// IdleConns is the idle connections held to each service; 0 means 300.
	// Every connection costs two file descriptors in this process (both
	// ends are here), so Run lowers it to stay well below RLIMIT_NOFILE.
	IdleConns int
	// PoisonEvery is the pause between poisoning rounds; 0 means 250 ms.
	PoisonEvery time.Duration
	// MalformedRate is malformed requests per second; 0 means 20.
	MalformedRate float64
}

func (s *Scale) defaults() {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&s.H2Conns, 18)
	def(&s.H2Streams, 250)
	def(&s.SlowBodies, 70)
	def(&s.FloodWorkers, 400)
	def(&s.IdleConns, 300)
	if s.PoisonEvery <= 0 {
		s.PoisonEvery = 250 * time.Millisecond
	}
	if s.MalformedRate <= 0 {
		s.MalformedRate = 20
	}
}

// Options configure a run.
type Options struct {
	// Duration is the whole run; 0 means 3 minutes.
	Duration time.Duration
	// Rate is good requests per second over both services; 0 means 20.
	Rate float64
	// Attacks are the attacks to run (names from Attacks); nil means all,
	// an empty non-nil slice none.
	Attacks []string
	// Scale sizes the attacks.
	Scale Scale
	// GoodTimeout bounds each good request; 0 means 10 s. A request that
	// takes longer counts as failed.
	GoodTimeout time.Duration
	// Progress receives a line every ProgressEvery; nil for none.
	Progress      io.Writer
	ProgressEvery time.Duration // 0 means 5 s
}

// Report is the outcome of a run.
type Report struct {
	// DurationSeconds is how long the phases ran; requests in flight at
	// the end are then waited for, up to Options.GoodTimeout.
	DurationSeconds float64          `json:"duration_seconds"`
	Rate            float64          `json:"rate"`
	Phases          []Phase          `json:"phases"`
	Services        []ServiceStats   `json:"services"`
	Kinds           []KindStats      `json:"kinds"`
	Attacks         []AttackStats    `json:"attacks"`
	Samples         []Sample         `json:"-"`
	Limits          map[string]int64 `json:"limits"` // the bounds the run kept to
}

// Phase is one time slice of the run and the attacks that ran in it.
type Phase struct {
	Name    string   `json:"name"`
	StartS  float64  `json:"start_s"`
	EndS    float64  `json:"end_s"`
	Attacks []string `json:"attacks"`
}

// Latency summarises a set of good requests.
type Latency struct {
	Sent        int     `json:"sent"`
	Succeeded   int     `json:"succeeded"`
	SuccessRate float64 `json:"success_rate"`
	P50ms       float64 `json:"p50_ms"` // over every request, failed ones at the time they took
	P99ms       float64 `json:"p99_ms"`
}

// ServiceStats is the good traffic to one service, overall and per phase.
type ServiceStats struct {
	Service string `json:"service"`
	Latency
	Phases   []PhaseStats   `json:"phases"`
	Failures map[string]int `json:"failures,omitempty"` // why requests failed: status or error class
}

// PhaseStats is the good traffic to one service in one phase.
type PhaseStats struct {
	Phase string `json:"phase"`
	Latency
}

// KindStats is one kind of good request over the whole run.
type KindStats struct {
	Service string `json:"service"`
	Kind    string `json:"kind"`
	Latency
}

// Counter is one named count of an attack.
type Counter struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// AttackStats is what one attack did and achieved.
type AttackStats struct {
	Name     string    `json:"name"`
	Target   string    `json:"target"`
	Source   string    `json:"source"`
	What     string    `json:"what"`
	Phases   []string  `json:"phases"`
	Counters []Counter `json:"counters"`
	Achieved string    `json:"achieved"`
}

// Sample is one good request.
type Sample struct {
	At      time.Duration // since the start of the run
	Latency time.Duration
	Service string
	Kind    string
	OK      bool
	Failure string // status or error class when !OK
}

func (o *Options) defaults() error {
	if o.Duration <= 0 {
		o.Duration = 3 * time.Minute
	}
	if o.Rate <= 0 {
		o.Rate = 20
	}
	if o.Rate > 1000 {
		return fmt.Errorf("soak: rate %g over 1000 requests per second", o.Rate)
	}
	// Every good request is kept as a sample until the report is made.
	if n := o.Rate * o.Duration.Seconds(); n > 1e6 {
		return fmt.Errorf("soak: %g good requests (rate × duration) over the million a run keeps", n)
	}
	if o.Attacks == nil {
		o.Attacks = Attacks
	}
	for _, a := range o.Attacks {
		if !slices.Contains(Attacks, a) {
			return fmt.Errorf("soak: unknown attack %q (known: %s)", a, strings.Join(Attacks, ", "))
		}
	}
	if o.GoodTimeout <= 0 {
		o.GoodTimeout = 10 * time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 5 * time.Second
	}
	o.Scale.defaults()
	return nil
}

// ParseAttacks reads --attacks: "all", "none", or a comma-separated list of
// names from Attacks. The list comes back in the order of Attacks, the
// order the phases run them in.
func ParseAttacks(s string) ([]string, error) {
	switch strings.TrimSpace(s) {
	case "all", "":
		return Attacks, nil
	case "none":
		return []string{}, nil
	}
	var named []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if !slices.Contains(Attacks, a) {
			return nil, fmt.Errorf("unknown attack %q (known: %s, or all, none)", a, strings.Join(Attacks, ", "))
		}
		named = append(named, a)
	}
	out := []string{}
	for _, a := range Attacks {
		if slices.Contains(named, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// schedule splits d into phases: a baseline, each attack alone, all
// together (with more than one), and a recovery phase. The baseline and the
// recovery get a twelfth of the run each; the rest is shared equally.
func schedule(d time.Duration, attacks []string) []Phase {
	if len(attacks) == 0 {
		return []Phase{{Name: "baseline", EndS: d.Seconds()}}
	}
	type slot struct {
		name    string
		attacks []string
	}
	slots := []slot{{"baseline", nil}}
	for _, a := range attacks {
		slots = append(slots, slot{a, []string{a}})
	}
	if len(attacks) > 1 {
		slots = append(slots, slot{"all attacks", attacks})
	}
	slots = append(slots, slot{"recovery", nil})
	edge := d / 12
	mid := (d - 2*edge) / time.Duration(len(slots)-2)
	var out []Phase
	at := time.Duration(0)
	for i, s := range slots {
		l := mid
		if i == 0 || i == len(slots)-1 {
			l = edge
		}
		if i == len(slots)-1 {
			l = d - at
		}
		out = append(out, Phase{Name: s.name, StartS: at.Seconds(), EndS: (at + l).Seconds(), Attacks: s.attacks})
		at += l
	}
	return out
}

// Run starts the services, runs the phases and returns the report. It
// returns early, with an error, only if the services cannot be started or
// ctx ends.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	fdLimit := openFileLimit()
	limits := o.Scale.fit(fdLimit)
	w, err := startWorld(ctx)
	if err != nil {
		return nil, err
	}
	defer w.close()

	phases := schedule(o.Duration, o.Attacks)
	rec := &recorder{}
	gens := map[string]*attack{}
	for _, a := range o.Attacks {
		gens[a] = newAttack(a, w, o.Scale)
	}

	start := time.Now()
	runCtx, cancel := context.WithDeadline(ctx, start.Add(o.Duration))
	defer cancel()

	var wg sync.WaitGroup
	good := newGood(w, rec, start, o.GoodTimeout)
	wg.Add(1)
	go func() {
		defer wg.Done()
		good.run(runCtx, o.Rate)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		progress(runCtx, o, rec, start, phases)
	}()

	for _, p := range phases {
		end := start.Add(time.Duration(p.EndS * float64(time.Second)))
		pctx, pcancel := context.WithDeadline(runCtx, end)
		var pw sync.WaitGroup
		for _, a := range p.Attacks {
			g := gens[a]
			g.phases = append(g.phases, p.Name)
			pw.Add(1)
			go func() {
				defer pw.Done()
				g.run(pctx)
			}()
		}
		<-pctx.Done()
		pcancel()
		// Every generator closes its connections before it returns, so
		// the next phase starts without this one's attackers.
		pw.Wait()
		if ctx.Err() != nil {
			break
		}
	}
	ran := time.Since(start)
	cancel()
	wg.Wait()
	good.wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &Report{DurationSeconds: ran.Seconds(), Rate: o.Rate, Phases: phases, Samples: rec.all(), Limits: limits}
	r.Limits["open_files_limit"] = int64(fdLimit)
	r.Services, r.Kinds = summarise(r.Samples, phases)
	for _, a := range o.Attacks {
		r.Attacks = append(r.Attacks, gens[a].stats())
	}
	if len(r.Samples) == 0 {
		return r, errors.New("soak: no good request was sent")
	}
	return r, nil
}

// recorder collects good-request samples.
type recorder struct {
	mu sync.Mutex
	s  []Sample
}

func (r *recorder) add(s Sample) {
	r.mu.Lock()
	r.s = append(r.s, s)
	r.mu.Unlock()
}

func (r *recorder) all() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.s)
	sort.Slice(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// since returns the samples recorded after the first n, and the new count.
func (r *recorder) since(n int) ([]Sample, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.s[n:]), len(r.s)
}

// progress prints, every o.ProgressEvery, the good traffic of the last
// interval per service.
func progress(ctx context.Context, o Options, rec *recorder, start time.Time, phases []Phase) {
	t := time.NewTicker(o.ProgressEvery)
	defer t.Stop()
	seen := 0
	from := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			var s []Sample
			s, seen = rec.since(seen)
			el := now.Sub(start)
			// The line covers the requests sent since the last one, which
			// may span a change of phase.
			name := phaseAt(phases, el).Name
			if p := phaseAt(phases, from).Name; p != name {
				name = p + " → " + name
			}
			line := fmt.Sprintf("%3.0f-%3.0fs  %-30s", from.Seconds(), el.Seconds(), name)
			from = el
			for _, svc := range []string{"notary", "log"} {
				var l []Sample
				for _, x := range s {
					if x.Service == svc {
						l = append(l, x)
					}
				}
				st := latency(l)
				line += fmt.Sprintf("  %s %d/%d ok p99 %.0f ms", svc, st.Succeeded, st.Sent, st.P99ms)
			}
			fmt.Fprintln(o.Progress, line)
		}
	}
}

func phaseAt(phases []Phase, at time.Duration) Phase {
	for _, p := range phases {
		if at.Seconds() < p.EndS {
			return p
		}
	}
	return phases[len(phases)-1]
}
