// Package gen makes synthetic HTTPS traces shaped like the hour of campus
// traffic that Forced Perspectives (IMC 2014, §3) replayed against a
// Convergence notary: its flow count, its share of servers resolvable by
// reverse DNS, its providers' shares of the traffic, the requests left
// after each client's cache, the live hosts a notary would have to probe,
// and the dead ones it could not reach. A Generator is a replay.Reader: the
// rest of the replay pipeline reads it as it reads a real trace.
package gen

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

type host struct {
	name  string
	prov  uint16
	naddr uint16
	dead  bool
	addr  uint32 // the first of its naddr address indexes
}

// model is what the Options fix before the first flow: the hosts, their
// addresses and popularity, and the clients' activity.
type model struct {
	o       Options
	hosts   []host
	byName  map[string]int32
	byAddr  map[netip.Addr]int32
	provCDF []float64   // cumulative share, for a slot's provider
	zipfCDF [][]float64 // per provider, cumulative popularity by rank
	first   []int32     // per provider, its first host
	mult    []float64   // per provider, live flows' byte multiplier
	perm    uint32      // odd multiplier spreading addresses over 198.18/15
	// Vose's alias table over the clients' activity.
	aliasP []float64
	aliasA []int32
}

// state is what changes as flows are made.
type state struct {
	rng     *rand.Rand
	made    int64
	u       float64 // the last flow's start, as a share of Duration
	n, m    []uint32
	reached []bool
	nreach  int
	stats   replay.Stats
}

// New returns a generator of the trace o describes, or an error saying
// which option is out of range.
func New(o Options) (*Generator, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	// Whole milliseconds: the resolution of nfdump's CSV, so that every
	// output format carries a flow's times exactly.
	o.Start = o.Start.Truncate(time.Millisecond)
	m, err := newModel(o)
	if err != nil {
		return nil, err
	}
	g := &Generator{o: o, m: m}
	g.s = state{
		rng:     rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15)),
		n:       make([]uint32, o.Clients),
		m:       make([]uint32, o.Clients),
		reached: make([]bool, len(m.hosts)),
	}
	return g, nil
}

func newModel(o Options) (*model, error) {
	m := &model{o: o, byName: make(map[string]int32), byAddr: make(map[netip.Addr]int32)}
	m.perm = uint32(mix(o.Seed^0x5bd1e995)) | 1
	var total float64
	for _, p := range o.Providers {
		total += p.Share
	}
	var cum float64
	styleN := map[NameStyle]int{}
	var addrN uint32
	live := make([]float64, len(o.Providers))
	for pi, p := range o.Providers {
		cum += p.Share / total
		m.provCDF = append(m.provCDF, cum)
		m.first = append(m.first, int32(len(m.hosts)))
		cdf := make([]float64, p.Hosts)
		var z float64
		for r := range cdf {
			z += math.Pow(float64(r+1), -p.Zipf)
			cdf[r] = z
		}
		for r := range cdf {
			cdf[r] /= z
		}
		m.zipfCDF = append(m.zipfCDF, cdf)
		prev := 0.0
		for r := 0; r < p.Hosts; r++ {
			h := host{prov: uint16(pi), naddr: uint16(p.Addrs), addr: addrN}
			idx := int32(len(m.hosts))
			for a := 0; a < p.Addrs; a++ {
				m.byAddr[m.addrOf(addrN)] = idx
				addrN++
			}
			h.dead = r >= o.DeadFromRank && unit(mix(o.Seed^0xdead^uint64(idx)<<20)) < p.Dead
			h.name = styleName(p.Style, styleN[p.Style], m.addrOf(h.addr), o.Seed)
			styleN[p.Style]++
			if _, dup := m.byName[h.name]; dup {
				return nil, fmt.Errorf("gen: providers make the name %s twice", h.name)
			}
			m.byName[h.name] = idx
			m.hosts = append(m.hosts, h)
			if !h.dead || !o.DeadUnanswered {
				live[pi] += cdf[r] - prev
			}
			prev = cdf[r]
		}
	}
	// Flows to dead hosts carry next to nothing when they go unanswered;
	// the live flows of a provider carry the rest of its share, so that
	// its bytes stay its Share of the traffic and the mean stays
	// MeanBytes.
	for pi := range o.Providers {
		mult := 0.0
		if live[pi] > 0 {
			mult = 1 / live[pi]
		}
		m.mult = append(m.mult, mult)
	}
	m.clients(o)
	return m, nil
}

// clients builds the alias table of the clients' lognormal activity.
func (m *model) clients(o Options) {
	r := rand.New(rand.NewPCG(o.Seed, 0xc11e)) // its own stream: the flows' does not depend on it
	n := o.Clients
	w := make([]float64, n)
	var sum float64
	for i := range w {
		w[i] = math.Exp(o.ClientSigma * r.NormFloat64())
		sum += w[i]
	}
	m.aliasP = make([]float64, n)
	m.aliasA = make([]int32, n)
	small, large := make([]int32, 0, n), make([]int32, 0, n)
	for i := range w {
		w[i] *= float64(n) / sum
		if w[i] < 1 {
			small = append(small, int32(i))
		} else {
			large = append(large, int32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		m.aliasP[s], m.aliasA[s] = w[s], l
		w[l] -= 1 - w[s]
		if w[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	for _, i := range append(small, large...) {
		m.aliasP[i], m.aliasA[i] = 1, i
	}
}

// addrOf returns the n'th server address: 198.18.0.0/15 in an order
// spread by the seed, then 100.64.0.0/10.
func (m *model) addrOf(n uint32) netip.Addr {
	var v uint32
	if n < 1<<17 {
		v = 198<<24 | 18<<16 + (n*m.perm+0x3c5)&(1<<17-1)
	} else {
		v = 100<<24 | 64<<16 + (n - 1<<17)
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func (m *model) name(a netip.Addr) (string, bool) {
	i, ok := m.byAddr[a.Unmap()]
	if !ok || !m.o.Providers[m.hosts[i].prov].Resolvable {
		return "", false
	}
	return m.hosts[i].name, true
}

func (m *model) dead(name string) bool {
	i, ok := m.byName[name]
	return ok && m.hosts[i].dead
}

func (m *model) host(i int) Host {
	h := m.hosts[i]
	p := m.o.Providers[h.prov]
	out := Host{Name: h.name, Provider: p.Name, Resolvable: p.Resolvable, Dead: h.dead}
	for a := uint32(0); a < uint32(h.naddr); a++ {
		out.Addrs = append(out.Addrs, m.addrOf(h.addr+a))
	}
	return out
}

// slotHost returns the host of client c's i'th slot: its provider by
// share, then a host by the provider's popularity. It is a function of
// (seed, c, i) alone, so a client needs no memory of its hosts.
func (m *model) slotHost(c, i uint32) int32 {
	h := mix(m.o.Seed ^ uint64(c)<<32 ^ uint64(i) ^ 0x51075107)
	p, _ := slices.BinarySearch(m.provCDF, unit(h))
	if p >= len(m.provCDF) {
		p = len(m.provCDF) - 1
	}
	cdf := m.zipfCDF[p]
	r, _ := slices.BinarySearch(cdf, unit(mix(h^0x2545f491)))
	if r >= len(cdf) {
		r = len(cdf) - 1
	}
	return m.first[p] + int32(r)
}

// Next returns the next flow, or io.EOF after Options.Flows of them.
func (g *Generator) Next() (replay.Flow, error) {
	o, m, s := &g.o, g.m, &g.s
	if s.made >= o.Flows {
		return replay.Flow{}, io.EOF
	}
	r := s.rng
	// The starts are the order statistics of Flows uniform instants,
	// drawn in order: a Poisson process of Flows/Duration a second,
	// conditioned on its count, one flow at a time.
	left := float64(o.Flows - s.made)
	s.u += (1 - s.u) * (1 - math.Pow(r.Float64(), 1/left))
	s.made++
	off := time.Duration(s.u * float64(o.Duration)).Truncate(time.Millisecond)
	if off >= o.Duration {
		off = o.Duration - time.Millisecond
	}

	c := uint32(r.IntN(o.Clients))
	if r.Float64() >= m.aliasP[c] {
		c = uint32(m.aliasA[c])
	}
	n, k := s.n[c], s.m[c]
	var slot uint32
	if k == 0 || r.Float64() < (o.NewHost+o.NewHostDiscount*float64(k))/(o.NewHost+float64(n)) {
		slot = k
		s.m[c]++
	} else {
		slot = uint32(float64(k) * math.Pow(r.Float64(), o.RevisitSkew))
	}
	s.n[c]++
	hi := m.slotHost(c, slot)
	h := &m.hosts[hi]
	if !s.reached[hi] {
		s.reached[hi] = true
		s.nreach++
	}
	addr := h.addr + uint32(mix(uint64(c)<<32|uint64(slot)^o.Seed)%uint64(h.naddr))

	f := replay.Flow{
		Start:  o.Start.Add(off),
		Client: netip.AddrFrom4([4]byte{10, byte((c + 1) >> 16), byte((c + 1) >> 8), byte(c + 1)}),
		Server: m.addrOf(addr),
		Port:   443,
	}
	if !o.NoSNI {
		f.ServerName = h.name
	}
	if h.dead && o.DeadUnanswered {
		// SYNs at 0, 1 and 3 s (Linux's retransmission schedule) until
		// the client gave up: nothing came back.
		syn := 1 + r.IntN(3)
		f.PacketsOut, f.BytesOut = uint64(syn), 60*uint64(syn)
		f.Duration = [3]time.Duration{0, time.Second, 3 * time.Second}[syn-1]
	} else {
		g.fill(&f, m.mult[h.prov])
	}
	s.stats.Read++
	s.stats.Kept++
	if f.ServerName != "" {
		s.stats.Named++
	}
	return f, nil
}

// Packet sizes: a full segment of a download, and the smallest packet the
// client sends (an ACK with timestamps).
const (
	segment  = 1400
	ackBytes = 52
	minBytes = 4000 // a handshake with a certificate chain, at least
)

// fill draws an answered flow's bytes, packets and duration.
func (g *Generator) fill(f *replay.Flow, mult float64) {
	o, r := &g.o, g.s.rng
	sig := o.BytesSigma
	total := o.MeanBytes * mult * math.Exp(sig*r.NormFloat64()-sig*sig/2)
	total = math.Max(total, minBytes)
	out := total * o.OutShare * (0.5 + r.Float64())
	in := total - out
	f.PacketsIn = uint64(math.Ceil(in / segment))
	// The client ACKs every other segment and sends its own data.
	f.PacketsOut = f.PacketsIn/2 + uint64(math.Ceil(out/segment))
	f.BytesIn = uint64(in)
	f.BytesOut = max(uint64(out), f.PacketsOut*ackBytes)
	d := float64(o.DurationMedian) * math.Exp(o.DurationSigma*r.NormFloat64())
	f.Duration = time.Duration(math.Min(d, float64(24*time.Hour))).Truncate(time.Millisecond)
}

// Reached returns how many distinct hosts the flows so far went to, and
// how many of them are dead.
func (g *Generator) Reached() (hosts, dead int) {
	for i, ok := range g.s.reached {
		if ok {
			hosts++
			if g.m.hosts[i].dead {
				dead++
			}
		}
	}
	return hosts, dead
}

// WasReached reports whether a flow so far went to the i'th host.
func (g *Generator) WasReached(i int) bool { return g.s.reached[i] }

// Options returns the options the generator was made with.
func (g *Generator) Options() Options { return g.o }

// mix is SplitMix64's finaliser: a bijection of 64 bits that spreads
// every input bit over the output.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// unit maps 64 random bits to [0, 1).
func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }
