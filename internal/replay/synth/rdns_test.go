package synth

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer is a real DNS server on loopback UDP answering PTR queries
// from a table (address → PTR names), NXDOMAIN for the rest, and
// SERVFAIL for the addresses in fail.
type dnsServer struct {
	addr    string
	queries atomic.Int64
	conn    net.PacketConn
	mu      sync.Mutex
	asked   map[string]int // reverse name → queries
}

func startDNS(t *testing.T, table map[string][]string, fail map[string]bool) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{addr: pc.LocalAddr().String(), conn: pc, asked: map[string]int{}}
	ptr := map[string][]string{}
	for a, names := range table {
		ptr[reverseName(t, a)] = names
	}
	failing := map[string]bool{}
	for a := range fail {
		failing[reverseName(t, a)] = true
	}
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			s.queries.Add(1)
			name := strings.ToLower(q.Name.String())
			s.mu.Lock()
			s.asked[name]++
			s.mu.Unlock()
			rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
			names, found := ptr[name]
			switch {
			case failing[name]:
				rh.RCode = dnsmessage.RCodeServerFailure
			case !found || q.Type != dnsmessage.TypePTR:
				rh.RCode = dnsmessage.RCodeNameError
			}
			b := dnsmessage.NewBuilder(nil, rh)
			b.EnableCompression()
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if rh.RCode == dnsmessage.RCodeSuccess {
				for _, n := range names {
					b.PTRResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60},
						dnsmessage.PTRResource{PTR: dnsmessage.MustNewName(n)})
				}
			}
			out, err := b.Finish()
			if err != nil {
				continue
			}
			pc.WriteTo(out, from)
		}
	}()
	return s
}

func reverseName(t *testing.T, a string) string {
	t.Helper()
	n, err := dnsReverse(netip.MustParseAddr(a))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// dnsReverse is the in-addr.arpa or ip6.arpa name of a.
func dnsReverse(a netip.Addr) (string, error) {
	if a.Is4() {
		b := a.As4()
		return strings.Join([]string{itoa(b[3]), itoa(b[2]), itoa(b[1]), itoa(b[0])}, ".") + ".in-addr.arpa.", nil
	}
	if !a.Is6() {
		return "", errors.New("not an address")
	}
	b := a.As16()
	const hex = "0123456789abcdef"
	var sb strings.Builder
	for i := 15; i >= 0; i-- {
		sb.WriteByte(hex[b[i]&0xf])
		sb.WriteByte('.')
		sb.WriteByte(hex[b[i]>>4])
		sb.WriteByte('.')
	}
	sb.WriteString("ip6.arpa.")
	return sb.String(), nil
}

func itoa(b byte) string { return netip.AddrFrom4([4]byte{0, 0, 0, b}).String()[6:] }

// virtualClock is a clock the rate limiter sleeps on without waiting: it
// records every slot it was asked to wait for.
type virtualClock struct {
	mu    sync.Mutex
	t     time.Time
	slots []time.Time
}

func (c *virtualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *virtualClock) sleepUntil(_ context.Context, t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slots = append(c.slots, t)
	if t.After(c.t) {
		c.t = t
	}
	return nil
}

func TestReverseDNS(t *testing.T) {
	table := map[string][]string{
		"192.0.2.1":   {"www.Example.COM."},
		"192.0.2.2":   {"a.example.net."},
		"2001:db8::1": {"v6.example.org."},
		"192.0.2.4":   {"bad_name!.example.", "good.example."},
	}
	srv := startDNS(t, table, map[string]bool{"192.0.2.9": true})
	addrs := []netip.Addr{
		netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"),
		netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("192.0.2.4"),
		netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("2001:db8::1"),
	}
	clock := &virtualClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	rd := &ReverseDNS{
		Resolver: Resolver(srv.addr), Rate: 2, Concurrency: 3, Timeout: 10 * time.Second,
		Cache: NewRDNSCache(), Now: clock.now, SleepUntil: clock.sleepUntil,
	}
	st, err := rd.Resolve(context.Background(), addrs)
	if err != nil {
		t.Fatal(err)
	}
	// 192.0.2.9's SERVFAIL: Go's resolver tries each configured server
	// (all dialled to ours) and each attempt, so it may ask more than
	// once; every other address is asked exactly once.
	want := RDNSStats{Addresses: 6, Queries: 6, Named: 4, NoName: 1, Errors: 1}
	st.FirstError = ""
	if st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	for _, a := range addrs {
		if a.String() == "192.0.2.9" {
			continue
		}
		srv.mu.Lock()
		n := srv.asked[reverseName(t, a.String())]
		srv.mu.Unlock()
		if n != 1 {
			t.Errorf("%s asked %d times", a, n)
		}
	}
	names := map[string]string{}
	for _, a := range addrs {
		n, _ := rd.Cache.Name(a)
		names[a.String()] = n
	}
	wantNames := map[string]string{
		"192.0.2.1": "www.example.com", "192.0.2.2": "a.example.net", "192.0.2.3": "",
		"192.0.2.4": "good.example", "192.0.2.9": "", "2001:db8::1": "v6.example.org",
	}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("names %v, want %v", names, wantNames)
	}
	if !rd.Cache.Looked(addrs[2]) || rd.Cache.Looked(addrs[4]) {
		t.Error("NXDOMAIN must be cached as a negative answer and SERVFAIL not at all")
	}
	// The rate limit, counted: six queries at 2 a second took slots
	// half a second apart, so the virtual clock ends 2.5 s on.
	if len(clock.slots) != 6 {
		t.Fatalf("%d slots for 6 queries", len(clock.slots))
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[time.Duration]bool{}
	for _, s := range clock.slots {
		seen[s.Sub(start)] = true
	}
	for i := range 6 {
		if !seen[time.Duration(i)*500*time.Millisecond] {
			t.Errorf("no query slot at %v: slots %v", time.Duration(i)*500*time.Millisecond, clock.slots)
		}
	}

	// The cache persisted and read back answers everything: no query.
	var file bytes.Buffer
	if _, err := rd.Cache.WriteTo(&file); err != nil {
		t.Fatal(err)
	}
	cache, err := ParseRDNSCache(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatalf("%v:\n%s", err, file.Bytes())
	}
	before := srv.queries.Load()
	rd2 := &ReverseDNS{Resolver: Resolver(srv.addr), Rate: 2, Concurrency: 3, Cache: cache, Now: clock.now, SleepUntil: clock.sleepUntil}
	st2, err := rd2.Resolve(context.Background(), addrs[:4])
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.queries.Load() - before; got != 0 || st2.Cached != 4 || st2.Queries != 0 {
		t.Errorf("second pass: %d queries, stats %+v", got, st2)
	}
	if n, ok := cache.Name(addrs[0]); !ok || n != "www.example.com" {
		t.Errorf("cached name %q %v", n, ok)
	}
	// MaxAge asks again what is older.
	clock.mu.Lock()
	clock.t = clock.t.Add(48 * time.Hour)
	clock.mu.Unlock()
	rd2.MaxAge = 24 * time.Hour
	st3, err := rd2.Resolve(context.Background(), addrs[:2])
	if err != nil {
		t.Fatal(err)
	}
	if st3.Queries != 2 || st3.Cached != 0 {
		t.Errorf("stale pass: %+v", st3)
	}
}

func TestRDNSCacheFile(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		n       int
	}{
		{in: "# c\n\n192.0.2.1 www.example.com 2026-01-01T00:00:00Z\n192.0.2.2 - 2026-01-01T00:00:00Z\n", n: 2},
		{in: "192.0.2.1 www.example.com\n", err: "line 1: want"},
		{in: "\n192.0.2.x www.example.com 2026-01-01T00:00:00Z\n", err: "line 2: \"192.0.2.x\" is not an IP address"},
		{in: "192.0.2.1 www..example.com 2026-01-01T00:00:00Z\n", err: "line 1: name"},
		{in: "192.0.2.1 a.example yesterday\n", err: "line 1: time"},
		{in: "192.0.2.1 a.example 2026-01-01T00:00:00Z\n" + strings.Repeat("x", 5000) + "\n", err: "line 2:"},
	} {
		c, err := ParseRDNSCache(strings.NewReader(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || c.Len() != tc.n {
			t.Errorf("%q: %v, %d entries", tc.in, err, c.Len())
		}
	}
}
