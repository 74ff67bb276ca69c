package synth

import (
	"bytes"
	"context"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/dnstest"
)

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
	ip := netip.MustParseAddr
	table := map[netip.Addr][]string{
		ip("192.0.2.1"):   {"www.Example.COM."},
		ip("192.0.2.2"):   {"a.example.net."},
		ip("2001:db8::1"): {"v6.example.org."},
		ip("192.0.2.4"):   {"bad_name!.example.", "good.example."},
	}
	srv := dnstest.Start(t, table, map[netip.Addr]bool{ip("192.0.2.9"): true})
	addrs := []netip.Addr{
		netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"),
		netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("192.0.2.4"),
		netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("2001:db8::1"),
	}
	clock := &virtualClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	rd := &ReverseDNS{
		Resolver: Resolver(srv.Addr), Rate: 2, Concurrency: 3, Timeout: 10 * time.Second,
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
		if n := srv.Asked(a); n != 1 {
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
	before := srv.Queries()
	rd2 := &ReverseDNS{Resolver: Resolver(srv.Addr), Rate: 2, Concurrency: 3, Cache: cache, Now: clock.now, SleepUntil: clock.sleepUntil}
	st2, err := rd2.Resolve(context.Background(), addrs[:4])
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Queries() - before; got != 0 || st2.Cached != 4 || st2.Queries != 0 {
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
