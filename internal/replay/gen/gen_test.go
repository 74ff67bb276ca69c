package gen

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// small is a quick trace with the paper's shape: 10,000 flows of 50
// clients over ten minutes.
func small() Options {
	o := DefaultOptions()
	o.Flows, o.Clients, o.Duration = 10000, 50, 10*time.Minute
	return o
}

func drain(t testing.TB, g *Generator) []replay.Flow {
	t.Helper()
	var fs []replay.Flow
	for {
		f, err := g.Next()
		if errors.Is(err, io.EOF) {
			return fs
		}
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
}

func traceHash(t *testing.T, o Options) [32]byte {
	t.Helper()
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w := replay.NewJSONLWriter(&b)
	for _, f := range drain(t, g) {
		if err := w.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b.Bytes())
}

func TestDeterministic(t *testing.T) {
	o := small()
	a, b := traceHash(t, o), traceHash(t, o)
	if a != b {
		t.Fatal("the same options made two different traces")
	}
	o.Seed++
	if c := traceHash(t, o); c == a {
		t.Fatal("another seed made the same trace")
	}
}

func TestFlows(t *testing.T) {
	o := small()
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	fs := drain(t, g)
	if int64(len(fs)) != o.Flows {
		t.Fatalf("%d flows, want %d", len(fs), o.Flows)
	}
	if st := g.Stats(); st.Read != o.Flows || st.Kept != o.Flows || st.Named != o.Flows {
		t.Errorf("stats %+v, want %d read, kept and named", st, o.Flows)
	}
	if _, err := g.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("Next after the last flow: %v, want io.EOF", err)
	}
	bench := netip.MustParsePrefix("198.18.0.0/15")
	clients := netip.MustParsePrefix("10.0.0.0/8")
	var prev time.Time
	var in, pin uint64
	deadFlows := 0
	for i, f := range fs {
		switch {
		case f.Start.Before(prev):
			t.Fatalf("flow %d starts at %v, before the one before it (%v)", i, f.Start, prev)
		case f.Start.Before(o.Start) || !f.Start.Before(o.Start.Add(o.Duration)):
			t.Fatalf("flow %d starts at %v, outside the trace", i, f.Start)
		case f.Start.Nanosecond()%int(time.Millisecond) != 0 || f.Duration%time.Millisecond != 0:
			t.Fatalf("flow %d: times finer than a millisecond: %v %v", i, f.Start, f.Duration)
		case f.Port != 443 || !bench.Contains(f.Server) || !clients.Contains(f.Client):
			t.Fatalf("flow %d: %v -> %v:%d", i, f.Client, f.Server, f.Port)
		case f.ServerName == "":
			t.Fatalf("flow %d has no SNI", i)
		}
		prev = f.Start
		// The SNI names the host the address serves; a resolvable
		// address's PTR is that name.
		if name, ok := g.Name(f.Server); ok && name != f.ServerName {
			t.Fatalf("flow %d: SNI %s, PTR %s", i, f.ServerName, name)
		}
		if g.Dead(f.ServerName) {
			deadFlows++
			if f.PacketsIn != 0 || f.BytesIn != 0 || f.PacketsOut == 0 {
				t.Fatalf("flow %d to dead %s was answered: %+v", i, f.ServerName, f)
			}
			continue
		}
		if f.PacketsIn == 0 || f.PacketsOut == 0 || f.BytesIn < f.BytesOut {
			t.Fatalf("flow %d to live %s: %+v", i, f.ServerName, f)
		}
		in += f.BytesIn
		pin += f.PacketsIn
	}
	if deadFlows == 0 {
		t.Error("no flow went to a dead host")
	}
	if per := float64(in) / float64(pin); per < 1300 || per > 1400 {
		t.Errorf("%.0f bytes a packet in, want about 1,400", per)
	}
}

func TestNoSNI(t *testing.T) {
	o := small()
	o.NoSNI = true
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, f := range drain(t, g) {
		if f.ServerName != "" {
			t.Fatalf("NoSNI flow with SNI %s", f.ServerName)
		}
		if _, ok := g.Name(f.Server); ok {
			named++
		}
	}
	if named == 0 || g.Stats().Named != 0 {
		t.Errorf("%d flows named by PTR, stats %+v", named, g.Stats())
	}
}

// validName reports whether s is a DNS host name in lower case.
func validName(s string) bool {
	if len(s) > 253 || !strings.Contains(s, ".") {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func TestHosts(t *testing.T) {
	g, err := New(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	addrs := map[netip.Addr]bool{}
	var unresolvable, apple, dead int
	for i := 0; i < g.Hosts(); i++ {
		h := g.Host(i)
		if !validName(h.Name) || names[h.Name] {
			t.Fatalf("host %d: bad or repeated name %q", i, h.Name)
		}
		names[h.Name] = true
		if h.Dead != g.Dead(h.Name) {
			t.Fatalf("host %s: Dead %v, Host says %v", h.Name, g.Dead(h.Name), h.Dead)
		}
		if h.Dead {
			dead++
		}
		for _, a := range h.Addrs {
			if addrs[a] || !a.Is4() || a.IsPrivate() || a.IsLoopback() {
				t.Fatalf("host %s: bad or repeated address %v", h.Name, a)
			}
			addrs[a] = true
			name, ok := g.Name(a)
			switch {
			case h.Resolvable && (!ok || name != h.Name):
				t.Fatalf("host %s: PTR of %v is %q, %v", h.Name, a, name, ok)
			case !h.Resolvable && ok:
				t.Fatalf("CDN host %s: %v has PTR %s", h.Name, a, name)
			}
			if !h.Resolvable {
				unresolvable++
				if h.Provider == "apple-akamai" {
					apple++
				}
			}
		}
	}
	// A third of the unresolvable addresses are Apple's, served by
	// Akamai (Forced Perspectives, §3.1).
	if share := float64(apple) / float64(unresolvable); share < 0.30 || share > 0.36 {
		t.Errorf("Apple has %.1f%% of the unresolvable addresses, want 33%%", 100*share)
	}
	if _, ok := g.Name(netip.MustParseAddr("192.0.2.1")); ok || g.Dead("www.example.com") {
		t.Error("a name or death for an address or host the generator does not have")
	}
	m, d := 0, 0
	for a, n := range g.Map() {
		if got, _ := g.Name(a); got != n {
			t.Fatalf("Map %v %s, Name says %s", a, n, got)
		}
		m++
	}
	for range g.DeadHosts() {
		d++
	}
	if m == 0 || m >= len(addrs) || d != dead {
		t.Errorf("Map has %d of %d addresses, DeadHosts %d of %d", m, len(addrs), d, dead)
	}
}

func TestOptionsRefused(t *testing.T) {
	for name, edit := range map[string]func(*Options){
		"negative flows":     func(o *Options) { o.Flows = -1 },
		"no duration":        func(o *Options) { o.Duration = 0 },
		"no clients":         func(o *Options) { o.Clients = 0 },
		"no providers":       func(o *Options) { o.Providers = nil },
		"discount of 1":      func(o *Options) { o.NewHostDiscount = 1 },
		"out share over 1":   func(o *Options) { o.OutShare = 1.5 },
		"resolvable CDN":     func(o *Options) { o.Providers[6].Resolvable = true },
		"too many hosts":     func(o *Options) { o.Providers[0].Hosts = maxAddrs },
		"nothing to share":   func(o *Options) { o.Providers = []Provider{{Name: "x", Hosts: 1, Addrs: 1}} },
		"unknown name style": func(o *Options) { o.Providers[0].Style = 99 },
	} {
		o := DefaultOptions()
		edit(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	o := DefaultOptions()
	o.Flows = int64(b.N)
	g, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "flows/s")
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
