package synth

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// Defaults of the reverse-DNS pass.
const (
	DefaultRDNSRate        = 50 // queries a second
	DefaultRDNSConcurrency = 16
	DefaultRDNSTimeout     = 5 * time.Second
	// DefaultRDNSMax bounds the distinct addresses looked up: about 100
	// MB of answers, several times the distinct destinations of the
	// paper's hour.
	DefaultRDNSMax = 1 << 20
)

// RDNSEntry is one reverse-DNS answer: a name, or none (Name empty) when
// the address had no valid PTR name; At is when it was looked up.
type RDNSEntry struct {
	Name string
	At   time.Time
}

// RDNSCache holds reverse-DNS answers, named and not, and persists them so
// a second synthesis of the same trace asks the resolver nothing. It is a
// Namer and a Looker. The zero value is not usable: use NewRDNSCache or
// ParseRDNSCache.
type RDNSCache struct {
	mu sync.Mutex
	m  map[netip.Addr]RDNSEntry
}

// NewRDNSCache returns an empty cache.
func NewRDNSCache() *RDNSCache { return &RDNSCache{m: map[netip.Addr]RDNSEntry{}} }

// Name returns addr's PTR name, if the cache has one.
func (c *RDNSCache) Name(addr netip.Addr) (string, bool) {
	c.mu.Lock()
	e, ok := c.m[addr.Unmap()]
	c.mu.Unlock()
	return e.Name, ok && e.Name != ""
}

// Looked reports whether the cache has an answer for addr, named or not.
func (c *RDNSCache) Looked(addr netip.Addr) bool {
	c.mu.Lock()
	_, ok := c.m[addr.Unmap()]
	c.mu.Unlock()
	return ok
}

// Get returns the entry for addr.
func (c *RDNSCache) Get(addr netip.Addr) (RDNSEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[addr.Unmap()]
	return e, ok
}

// Put records an answer.
func (c *RDNSCache) Put(addr netip.Addr, e RDNSEntry) {
	c.mu.Lock()
	c.m[addr.Unmap()] = e
	c.mu.Unlock()
}

// Len is how many answers the cache holds.
func (c *RDNSCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// rdnsCacheHeader opens a cache file, saying what its lines are.
const rdnsCacheHeader = "# pkie reverse DNS cache: ADDR NAME|- LOOKED-UP-AT (RFC 3339)\n"

// WriteTo writes the cache in its file format (docs/formats/notary-and-tools.md, "Reverse
// DNS cache"): a comment line, then one "ADDR NAME TIME" line per
// address in address order, NAME "-" for an address without a name.
func (c *RDNSCache) WriteTo(w io.Writer) (int64, error) {
	c.mu.Lock()
	addrs := make([]netip.Addr, 0, len(c.m))
	for a := range c.m {
		addrs = append(addrs, a)
	}
	c.mu.Unlock()
	slices.SortFunc(addrs, netip.Addr.Compare)
	bw := bufio.NewWriter(w)
	var n int64
	k, _ := bw.WriteString(rdnsCacheHeader)
	n += int64(k)
	for _, a := range addrs {
		e, _ := c.Get(a)
		name := e.Name
		if name == "" {
			name = "-"
		}
		k, _ := fmt.Fprintf(bw, "%s %s %s\n", a, name, e.At.UTC().Format(time.RFC3339))
		n += int64(k)
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("synth: writing reverse DNS cache: %w", err)
	}
	return n, nil
}

// ParseRDNSCache reads a cache file written by WriteTo. Blank lines and
// '#' comments are skipped; any other malformed line is an error naming
// it, since the file is pkie's own and a damaged one should not quietly
// name flows.
func ParseRDNSCache(r io.Reader) (*RDNSCache, error) {
	c := NewRDNSCache()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxMapLine)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want \"ADDR NAME|- TIME\", got %d fields", line, len(f))
		}
		addr, err := netip.ParseAddr(f[0])
		if err != nil || addr.Zone() != "" {
			return nil, fmt.Errorf("line %d: %q is not an IP address", line, clip(f[0]))
		}
		at, err := time.Parse(time.RFC3339, f[2])
		if at = at.UTC(); err != nil || at.Year() < 1970 || at.Year() > 9999 {
			return nil, fmt.Errorf("line %d: time %q: want RFC 3339, 1970 to 9999", line, clip(f[2]))
		}
		e := RDNSEntry{At: at}
		if f[1] != "-" {
			if e.Name, err = CanonicalName(f[1]); err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
		}
		c.m[addr.Unmap()] = e
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	return c, nil
}

// AddrSet collects the distinct addresses a trace needs looked up, up to a
// bound; flows whose address did not fit are counted.
type AddrSet struct {
	max  int
	m    map[netip.Addr]struct{}
	Over int64 // flows whose new address was past the bound
}

// NewAddrSet returns a set holding at most max addresses.
func NewAddrSet(max int) *AddrSet {
	return &AddrSet{max: max, m: map[netip.Addr]struct{}{}}
}

// Add adds a, reporting false (and counting) when the set is full.
func (s *AddrSet) Add(a netip.Addr) bool {
	a = a.Unmap()
	if _, ok := s.m[a]; ok {
		return true
	}
	if len(s.m) >= s.max {
		s.Over++
		return false
	}
	s.m[a] = struct{}{}
	return true
}

// Len is how many distinct addresses the set holds.
func (s *AddrSet) Len() int { return len(s.m) }

// Addrs returns the addresses in order.
func (s *AddrSet) Addrs() []netip.Addr {
	out := make([]netip.Addr, 0, len(s.m))
	for a := range s.m {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// CollectRDNS reads r and gathers the server addresses of the flows that
// naming as cfg says would ask reverse DNS about: the first pass.
func CollectRDNS(ctx context.Context, r replay.Reader, cfg *Config, set *AddrSet) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if cfg.NeedsRDNS(&f) {
			set.Add(f.Server)
		}
	}
}

// A PTRResolver looks up the names of an address; *net.Resolver is one.
type PTRResolver interface {
	LookupAddr(ctx context.Context, addr string) ([]string, error)
}

// Resolver returns the resolver for server ("host:port"), or the system's
// when server is empty. A configured server gets every query, over UDP
// and, for truncated answers, TCP.
func Resolver(server string) PTRResolver {
	if server == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		},
	}
}

// ReverseDNS looks up many addresses: at most Rate queries a second and
// Concurrency at once, each within Timeout, answering from Cache first and
// recording every definite answer (a name, or none) there.
type ReverseDNS struct {
	Resolver    PTRResolver
	Rate        float64 // queries a second; zero or less: unlimited
	Concurrency int
	Timeout     time.Duration
	Cache       *RDNSCache
	// MaxAge, if positive, makes cached answers older than it be asked
	// again.
	MaxAge time.Duration
	// Now and SleepUntil are the clock; nil means the real one. Tests
	// drive the rate limit with a clock of their own.
	Now        func() time.Time
	SleepUntil func(ctx context.Context, t time.Time) error
	// Progress, if not nil, is called after each query with the counts so
	// far, one call at a time.
	Progress func(RDNSStats)
}

// RDNSStats counts a reverse-DNS pass.
type RDNSStats struct {
	Addresses int64 `json:"addresses"` // distinct addresses to name
	Cached    int64 `json:"cached"`    // answered from the cache
	Queries   int64 `json:"queries"`   // lookups sent to the resolver
	Named     int64 `json:"named"`     // queries answered with a valid name
	NoName    int64 `json:"no_name"`   // answered: no such name
	Invalid   int64 `json:"invalid"`   // answered with names that are not DNS names
	Errors    int64 `json:"errors"`    // failed (timeout, server failure): not cached
	// FirstError describes the first failure.
	FirstError string `json:"first_error,omitempty"`
}

// Resolve names addrs, filling d.Cache. It stops early, returning the
// context's error, when ctx ends; what was answered stays in the cache.
func (d *ReverseDNS) Resolve(ctx context.Context, addrs []netip.Addr) (RDNSStats, error) {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	sleep := d.SleepUntil
	if sleep == nil {
		sleep = sleepUntil
	}
	st := RDNSStats{Addresses: int64(len(addrs))}
	var todo []netip.Addr
	for _, a := range addrs {
		if e, ok := d.Cache.Get(a); ok && (d.MaxAge <= 0 || now().Sub(e.At) < d.MaxAge) {
			st.Cached++
			continue
		}
		todo = append(todo, a)
	}
	lim := &limiter{now: now}
	if d.Rate > 0 {
		lim.interval = time.Duration(float64(time.Second) / d.Rate)
	}
	workers := max(d.Concurrency, 1)
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = DefaultRDNSTimeout
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next int
	)
	take := func() (netip.Addr, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(todo) || ctx.Err() != nil {
			return netip.Addr{}, false
		}
		next++
		return todo[next-1], true
	}
	for range workers {
		wg.Go(func() {
			for {
				a, ok := take()
				if !ok {
					return
				}
				if err := sleep(ctx, lim.slot()); err != nil {
					return
				}
				lctx, cancel := context.WithTimeout(ctx, timeout)
				names, err := d.Resolver.LookupAddr(lctx, a.String())
				cancel()
				mu.Lock()
				st.Queries++
				e, def := d.answer(names, err, &st)
				if d.Progress != nil {
					d.Progress(st)
				}
				mu.Unlock()
				if def {
					e.At = now().UTC().Truncate(time.Second)
					d.Cache.Put(a, e)
				}
			}
		})
	}
	wg.Wait()
	return st, ctx.Err()
}

// answer turns a lookup's outcome into a cache entry, counting it; def is
// false when the outcome was no answer at all.
func (d *ReverseDNS) answer(names []string, err error, st *RDNSStats) (e RDNSEntry, def bool) {
	var dnsErr *net.DNSError
	isDNS := errors.As(err, &dnsErr)
	switch {
	case err == nil:
	case len(names) > 0:
		// Go's resolver drops names that are not valid and says so
		// beside the rest.
	case isDNS && dnsErr.IsNotFound:
		st.NoName++
		return RDNSEntry{}, true
	case isDNS && strings.Contains(dnsErr.Err, "invalid names"):
		st.Invalid++
		return RDNSEntry{}, true
	default:
		st.Errors++
		if st.FirstError == "" {
			st.FirstError = err.Error()
		}
		return RDNSEntry{}, false
	}
	// A PTR set can hold several names; the first valid one in the
	// resolver's order is the name, as a browser would show it.
	for _, n := range names {
		if c, err := CanonicalName(n); err == nil {
			st.Named++
			return RDNSEntry{Name: c}, true
		}
	}
	if len(names) > 0 {
		st.Invalid++
	} else {
		st.NoName++
	}
	return RDNSEntry{}, true
}

// limiter hands out query times at most one per interval apart.
type limiter struct {
	mu       sync.Mutex
	now      func() time.Time
	interval time.Duration
	next     time.Time
}

// slot returns when the next query may leave.
func (l *limiter) slot() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.now()
	if l.next.After(t) {
		t = l.next
	}
	l.next = t.Add(l.interval)
	return t
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
