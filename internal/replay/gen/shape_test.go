package gen

import (
	"errors"
	"flag"
	"io"
	"math"
	"net/netip"
	"testing"
)

// shape is what a trace measures to, run through the paper's method: name
// each flow by its server's PTR record (dropping the rest), then a cache
// per client that never expires (Forced Perspectives, IMC 2014, §3.2) and
// that, as `pkie replay synth` does for a trace counting packets both
// ways, only an answered flow fills ("failed requests cannot be cached",
// Table 2).
type shape struct {
	flows, named, requests, dead int64
	liveHosts, deadHosts         int
	bytes                        float64
	provBytes                    map[string]float64
	sniRequests                  int64 // requests if every flow were named by its SNI
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
		answered := f.PacketsIn > 0 || f.PacketsOut == 0
		if f.ServerName != "" && !seenSNI[pair{f.Client, f.ServerName}] {
			seenSNI[pair{f.Client, f.ServerName}] = answered
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
		seen[p] = answered
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

var paperHour = flag.Bool("paper-hour", false, "also generate the paper's full hour (about 6 s) and check its absolute figures")

// within fails the test unless got is within tol (relative) of want.
func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Abs(want) {
		t.Errorf("%s = %.4g, want %.4g ±%.0f%%", what, got, want, 100*tol)
	}
}

// TestPaperShape checks that a twentieth of the paper's campus has the
// paper's shares: the resolvable flows, the requests left after the client
// caches, the requests to dead hosts, the bytes a flow, and the providers'
// shares of the traffic.
func TestPaperShape(t *testing.T) {
	g, err := New(DefaultOptions().Scaled(1.0 / 20))
	if err != nil {
		t.Fatal(err)
	}
	s := measure(t, g)
	s.log(t)
	if want := int64(math.Round(PaperFlows / 20.0)); s.flows != want {
		t.Errorf("flows = %d, want %d", s.flows, want)
	}
	within(t, "named share", float64(s.named)/float64(s.flows), float64(PaperNamedFlows)/PaperFlows, 0.03)
	within(t, "requests per named flow", float64(s.requests)/float64(s.named), float64(PaperRequests)/PaperNamedFlows, 0.1)
	within(t, "share of requests to dead hosts", float64(s.dead)/float64(s.requests), float64(PaperUnavailable)/PaperRequests, 0.1)
	within(t, "mean bytes a flow", s.bytes/float64(s.flows), PaperBytes/PaperFlows, 0.1)
	// Bytes are heavy-tailed: a small provider's share of a twentieth of
	// the hour is noisy. Spotify's is some 390 flows of lognormal σ 2
	// bytes (a flow's coefficient of variation √(e⁴−1) ≈ 7.3), so its
	// mean's is ≈ 0.37: ±100% here, ±25% over the full hour
	// (TestPaperHour).
	for p, want := range map[string][2]float64{"facebook": {0.14, 0.1}, "twitter": {0.04, 0.15}, "aws": {0.09, 0.15}, "spotify": {0.002, 1}} {
		within(t, p+"'s share of the bytes", s.provBytes[p]/s.bytes, want[0], want[1])
	}
	within(t, "akamai's share of the bytes", (s.provBytes["akamai"]+s.provBytes["akamai-edge"]+s.provBytes["apple-akamai"])/s.bytes, 0.24, 0.1)
	// Every flow carries its host's name; a modern trace names all of
	// them, the 46% the paper lost included.
	if s.sniRequests <= s.requests {
		t.Errorf("SNI naming gives %d requests, no more than the PTR naming's %d", s.sniRequests, s.requests)
	}
}

// TestPaperHour checks the paper's absolute figures at full size; it
// takes a few seconds, so it runs only with -paper-hour.
func TestPaperHour(t *testing.T) {
	if !*paperHour {
		t.Skip("run with -paper-hour")
	}
	g, err := New(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s := measure(t, g)
	s.log(t)
	within(t, "named flows", float64(s.named), PaperNamedFlows, 0.03)
	within(t, "requests", float64(s.requests), PaperRequests, 0.1)
	within(t, "requests to dead hosts", float64(s.dead), PaperUnavailable, 0.1)
	within(t, "live hosts reached", float64(s.liveHosts), PaperMisses, 0.1)
	within(t, "bytes", s.bytes, PaperBytes, 0.05)
	for p, want := range map[string][2]float64{"facebook": {0.14, 0.05}, "twitter": {0.04, 0.1}, "aws": {0.09, 0.1}, "spotify": {0.002, 0.25}} {
		within(t, p+"'s share of the bytes", s.provBytes[p]/s.bytes, want[0], want[1])
	}
	within(t, "akamai's share of the bytes", (s.provBytes["akamai"]+s.provBytes["akamai-edge"]+s.provBytes["apple-akamai"])/s.bytes, 0.24, 0.05)
}
