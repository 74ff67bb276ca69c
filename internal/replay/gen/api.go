package gen

import (
	"iter"
	"net/netip"

	"github.com/pkie/pkie/internal/replay"
)

// Generator yields the flows of a synthetic trace in nondecreasing Start
// order. It implements replay.Reader, so every stage that reads a trace
// reads it too. Its memory is a few words per client and per host: flows
// are made as they are asked for, never held.
//
// A Generator is not safe for concurrent use.
type Generator struct {
	o Options
	// Filled in by New (gen.go).
	m *model
	s state
}

var _ replay.Reader = (*Generator)(nil)

// Name returns the reverse-DNS (PTR) name of addr, a server address of the
// trace, and reports whether it has one: only the resolvable share of the
// servers does; the content-distribution addresses have none, as in
// Forced Perspectives, IMC 2014, §3.1.
func (g *Generator) Name(addr netip.Addr) (string, bool) { return g.m.name(addr) }

// Dead reports whether host, a server name of the trace, is one of the
// generator's dead targets: a name that no longer serves TLS on port 443,
// whose notary requests fail (the paper's 503s).
func (g *Generator) Dead(host string) bool { return g.m.dead(host) }

// Hosts returns how many distinct server names the generator can draw
// from (live and dead, resolvable or not); a trace reaches a part of them.
func (g *Generator) Hosts() int { return len(g.m.hosts) }

// Host describes one server name of the generator.
type Host struct {
	Name string
	// Provider is the Provider.Name the host belongs to.
	Provider string
	// Addrs are its server addresses; a resolvable host has one, whose
	// PTR record is Name.
	Addrs      []netip.Addr
	Resolvable bool
	Dead       bool
}

// Host returns the i'th host, 0 <= i < Hosts().
func (g *Generator) Host(i int) Host { return g.m.host(i) }

// Stats reports the flows made so far.
func (g *Generator) Stats() replay.Stats { return g.s.stats }

// Map yields the reverse-DNS map of every resolvable server address, in a
// fixed order: what a PTR lookup of the trace's addresses would answer,
// and what `pkie replay gen --map` writes as "ADDR NAME" lines.
func (g *Generator) Map() iter.Seq2[netip.Addr, string] {
	return func(yield func(netip.Addr, string) bool) {
		for i := range g.m.hosts {
			h := &g.m.hosts[i]
			if !g.o.Providers[h.prov].Resolvable {
				continue
			}
			if !yield(g.m.addrOf(h.addr), h.name) {
				return
			}
		}
	}
}

// DeadHosts yields the names of the generator's dead targets, in a fixed
// order.
func (g *Generator) DeadHosts() iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range g.m.hosts {
			if g.m.hosts[i].dead && !yield(g.m.hosts[i].name) {
				return
			}
		}
	}
}
