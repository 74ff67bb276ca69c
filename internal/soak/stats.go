package soak

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// latency summarises samples. Failed requests count at the time they took
// (a request that timed out counts at the timeout), so p99 reflects what a
// client waited, not only what succeeded.
func latency(s []Sample) Latency {
	l := Latency{Sent: len(s)}
	if len(s) == 0 {
		return l
	}
	ms := make([]float64, len(s))
	for i, x := range s {
		if x.OK {
			l.Succeeded++
		}
		ms[i] = float64(x.Latency) / float64(time.Millisecond)
	}
	slices.Sort(ms)
	l.SuccessRate = float64(l.Succeeded) / float64(l.Sent)
	l.P50ms = quantile(ms, 0.50)
	l.P99ms = quantile(ms, 0.99)
	return l
}

// quantile returns the q-quantile of sorted values (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// summarise groups samples per service (overall and per phase) and per kind.
func summarise(samples []Sample, phases []Phase) ([]ServiceStats, []KindStats) {
	var svcs []ServiceStats
	for _, svc := range []string{"notary", "log"} {
		var all []Sample
		byPhase := make([][]Sample, len(phases))
		fails := map[string]int{}
		for _, s := range samples {
			if s.Service != svc {
				continue
			}
			all = append(all, s)
			for i, p := range phases {
				if s.At.Seconds() >= p.StartS && s.At.Seconds() < p.EndS || i == len(phases)-1 && s.At.Seconds() >= p.EndS {
					byPhase[i] = append(byPhase[i], s)
					break
				}
			}
			if !s.OK {
				fails[s.Failure]++
			}
		}
		st := ServiceStats{Service: svc, Latency: latency(all)}
		for i, p := range phases {
			st.Phases = append(st.Phases, PhaseStats{Phase: p.Name, Latency: latency(byPhase[i])})
		}
		if len(fails) > 0 {
			st.Failures = fails
		}
		svcs = append(svcs, st)
	}
	var kinds []KindStats
	for _, k := range goodKinds {
		var ks []Sample
		for _, s := range samples {
			if s.Kind == k.name {
				ks = append(ks, s)
			}
		}
		kinds = append(kinds, KindStats{Service: k.service, Kind: k.name, Latency: latency(ks)})
	}
	return svcs, kinds
}

// counters are an attack's named counts, in the order they were declared.
type counters struct {
	mu    sync.Mutex
	names []string
	m     map[string]*atomic.Int64
	peaks map[string]*atomic.Int64 // gauge name → its peak
}

func newCounters(names ...string) *counters {
	c := &counters{m: map[string]*atomic.Int64{}, peaks: map[string]*atomic.Int64{}}
	for _, n := range names {
		c.names = append(c.names, n)
		c.m[n] = new(atomic.Int64)
	}
	return c
}

// add adds d to the counter name, which must have been declared.
func (c *counters) add(name string, d int64) { c.m[name].Add(d) }

// set sets the counter name, a level measured rather than counted.
func (c *counters) set(name string, v int64) { c.m[name].Store(v) }

// get returns the counter's value.
func (c *counters) get(name string) int64 { return c.m[name].Load() }

// gauge declares a gauge: a level that goes up and down, reported as
// "<name>" (its value at the end) and "<name>_peak".
type gauge struct {
	v, peak *atomic.Int64
}

func (c *counters) gauge(name string) gauge {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[name]; !ok {
		c.names = append(c.names, name+"_peak", name)
		c.m[name] = new(atomic.Int64)
		c.m[name+"_peak"] = new(atomic.Int64)
	}
	return gauge{c.m[name], c.m[name+"_peak"]}
}

func (g gauge) inc() {
	v := g.v.Add(1)
	for {
		p := g.peak.Load()
		if v <= p || g.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

func (g gauge) dec() { g.v.Add(-1) }

func (c *counters) list() []Counter {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Counter, 0, len(c.names))
	for _, n := range c.names {
		out = append(out, Counter{Name: n, Value: c.m[n].Load()})
	}
	return out
}
