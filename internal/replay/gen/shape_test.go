package gen

import (
	"errors"
	"io"
	"net/netip"
	"testing"
)

// shape is what a trace measures to, run through the paper's method: name
// each flow by its server's PTR record (dropping the rest), then a cache
// per client that never expires (Forced Perspectives, IMC 2014, §3.2).
type shape struct {
	flows, named, requests, dead int64
	liveHosts, deadHosts        int
	bytes                       float64
	provBytes                   map[string]float64
	sniRequests                 int64 // requests if every flow were named by its SNI
}

func measure(t testing.TB, g *Generator) shape {
	t.Helper()
	type pair struct {
		c netip.Addr
		h string
	}
	seen := map[pair]bool{}
	seenSNI := map[pair]bool{}
	hosts := map[string]bool{}
	provOf := map[netip.Addr]string{}
	for i := 0; i < g.Hosts(); i++ {
		h := g.Host(i)
		for _, a := range h.Addrs {
			provOf[a] = h.Provider
		}
	}
	s := shape{provBytes: map[string]float64{}}
	for {
		f, err := g.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		s.flows++
		b := float64(f.BytesIn + f.BytesOut)
		s.bytes += b
		s.provBytes[provOf[f.Server]] += b
		if f.ServerName != "" && !seenSNI[pair{f.Client, f.ServerName}] {
			seenSNI[pair{f.Client, f.ServerName}] = true
			s.sniRequests++
		}
		name, ok := g.Name(f.Server)
		if !ok {
			continue
		}
		s.named++
		p := pair{f.Client, name}
		if seen[p] {
			continue
		}
		seen[p] = true
		s.requests++
		if g.Dead(name) {
			s.dead++
		}
		hosts[name] = true
	}
	for h := range hosts {
		if g.Dead(h) {
			s.deadHosts++
		} else {
			s.liveHosts++
		}
	}
	return s
}

func (s shape) log(t testing.TB) {
	t.Logf("flows %d named %d (%.1f%%) requests %d (%.1f%% of named) dead requests %d (%.1f%%) live hosts %d dead hosts %d mean bytes %.0f sni requests %d",
		s.flows, s.named, 100*float64(s.named)/float64(s.flows), s.requests, 100*float64(s.requests)/float64(s.named),
		s.dead, 100*float64(s.dead)/float64(s.requests), s.liveHosts, s.deadHosts, s.bytes/float64(s.flows), s.sniRequests)
	for p, b := range s.provBytes {
		t.Logf("  %-14s %.2f%% of bytes", p, 100*b/s.bytes)
	}
}

func TestCalibrate(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	o := DefaultOptions()
	if *full == false {
		o = o.Scaled(1.0 / 20)
	}
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	measure(t, g).log(t)
}
