// Package overhead measures what HTTPS costs over HTTP when downloading whole
// web pages, the way the MSc thesis did ("Analysis of HTTPS overhead and
// minimal web certificate chain of trust", Algorithm 3.1): each page — the
// HTML, following redirects, plus the images, scripts and stylesheets it
// references, and what those stylesheets and its inline CSS reference in
// turn (url() and @import) — is downloaded N times over http:// and N
// times over https://, and the overhead is the difference in download
// time. Scripts are not run, so what they would load is not fetched.
//
// Two connection modes are measured. Non-persistent opens a new TCP
// connection (and, for HTTPS, performs a full TLS handshake with no session
// resumption) for every object, as the thesis's first experiment did.
// Persistent keeps connections alive for the duration of one page load, as
// a browser does, so the handshake is paid once per connection rather than
// once per object. Either way, nothing is carried from one page load to the
// next: each load has its own client.
//
// Every request is timed phase by phase (DNS, connect, TLS, first byte,
// transfer) with net/http/httptrace. Both schemes speak HTTP/1.1, so the
// difference between them is TLS and not a change of protocol. Runs
// alternate which scheme goes first, so slow drift in the network loads
// both sides equally.
package overhead

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/probe"
)

// Mode is a connection mode.
type Mode string

// Connection modes.
const (
	NonPersistent Mode = "nonpersistent" // a new connection for every object
	Persistent    Mode = "persistent"    // keep-alive within one page load
)

// ParseMode parses "persistent", "nonpersistent" or "both".
func ParseMode(s string) ([]Mode, error) {
	switch strings.ToLower(s) {
	case "nonpersistent", "non-persistent":
		return []Mode{NonPersistent}, nil
	case "persistent":
		return []Mode{Persistent}, nil
	case "both", "":
		return []Mode{NonPersistent, Persistent}, nil
	}
	return nil, fmt.Errorf("mode %q is not persistent, nonpersistent or both", s)
}

// Defaults.
const (
	DefaultRuns           = 100 // page loads per site, scheme and mode, as in the thesis
	DefaultPageTimeout    = 30 * time.Second
	DefaultMaxObjectBytes = 8 << 20
	DefaultMaxPageBytes   = 64 << 20
	DefaultMaxObjects     = 256
	DefaultMaxRedirects   = 10
	DefaultConcurrency    = 1
	DefaultParallel       = 1
)

// Options configure a Meter. The zero value measures public sites with the
// defaults above.
type Options struct {
	Runs  int    // page loads per site, scheme and mode; 0 means DefaultRuns
	Modes []Mode // nil means both

	// Concurrency is how many sites are measured at once. Loads of one
	// site never overlap each other.
	Concurrency int
	// Parallel is how many sub-resources one page load fetches at once
	// (a browser uses about six connections per host); 1 fetches them in
	// document order, one after another.
	Parallel int

	PageTimeout    time.Duration // one whole page load
	MaxObjectBytes int64         // one response body
	MaxPageBytes   int64         // all bodies of one page load together
	MaxObjects     int           // sub-resources fetched per page
	MaxRedirects   int           // per object

	// IgnoreCSS fetches only what the HTML's markup references, not what
	// CSS references (url()s and @imports in stylesheets, <style> blocks
	// and style attributes), as versions before CSS support did.
	IgnoreCSS bool

	// AllowPrivate permits loopback, private and other non-public
	// addresses; by default they are refused, so the tool cannot be aimed
	// at internal services.
	AllowPrivate bool
	// Lookup overrides DNS (a testbed resolver, --resolve); it is given the
	// URL's host and port (80 or 443).
	Lookup probe.Lookup

	RootCAs            *x509.CertPool // nil means the system's roots
	InsecureSkipVerify bool           // do not validate certificates
	MaxTLSVersion      uint16         // 0 means TLS 1.3

	UserAgent   string
	KeepObjects bool      // keep each request's record in Load.Objects
	Progress    io.Writer // progress lines (stderr); nil is silent
}

// Meter measures page-download overhead. It is safe for concurrent use.
type Meter struct {
	opts Options
}

// New returns a Meter with opts' zero fields set to their defaults.
func New(opts Options) *Meter {
	if opts.Runs <= 0 {
		opts.Runs = DefaultRuns
	}
	if len(opts.Modes) == 0 {
		opts.Modes = []Mode{NonPersistent, Persistent}
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultParallel
	}
	if opts.PageTimeout <= 0 {
		opts.PageTimeout = DefaultPageTimeout
	}
	if opts.MaxObjectBytes <= 0 {
		opts.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if opts.MaxPageBytes <= 0 {
		opts.MaxPageBytes = DefaultMaxPageBytes
	}
	if opts.MaxObjects <= 0 {
		opts.MaxObjects = DefaultMaxObjects
	}
	if opts.MaxRedirects <= 0 {
		opts.MaxRedirects = DefaultMaxRedirects
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "pkie-overhead/1 (+https://github.com/pkie/pkie)"
	}
	return &Meter{opts: opts}
}

// Site is a page to measure, with its two addresses.
type Site struct {
	Name  string   // host and path, e.g. "example.com/news"
	HTTP  *url.URL // http://…
	HTTPS *url.URL // https://…
}

// ParseSite turns "example.com", "example.com/path" or an http(s) URL into
// the page's HTTP and HTTPS addresses. The comparison is between a site's
// standard ports, so a URL with an explicit port is refused (map a test
// server's port with a Lookup instead).
func ParseSite(raw string) (Site, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return Site{}, fmt.Errorf("empty URL")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return Site{}, fmt.Errorf("malformed URL %q: %v", trunc(raw, 200), err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return Site{}, fmt.Errorf("URL %q: scheme %q is not http or https", trunc(raw, 200), u.Scheme)
	case u.Hostname() == "":
		return Site{}, fmt.Errorf("URL %q has no host", trunc(raw, 200))
	case u.User != nil:
		return Site{}, fmt.Errorf("URL %q carries user credentials; refusing to send them", trunc(raw, 200))
	case u.Port() != "":
		return Site{}, fmt.Errorf("URL %q names port %s; the overhead compares a site's standard ports 80 and 443 (use --resolve to reach a server elsewhere)", trunc(raw, 200), u.Port())
	case strings.ContainsAny(u.Hostname(), " \t%"):
		return Site{}, fmt.Errorf("URL %q: malformed host %q", trunc(raw, 200), u.Hostname())
	}
	if _, err := netip.ParseAddr(u.Hostname()); err != nil && len(u.Hostname()) > 253 {
		return Site{}, fmt.Errorf("URL %q: host is %d bytes long; a DNS name has at most 253", trunc(raw, 200), len(u.Hostname()))
	}
	u.Fragment, u.RawFragment = "", ""
	u.Host = strings.ToLower(u.Host)
	if u.Path == "" {
		u.Path = "/"
	}
	h, hs := *u, *u
	h.Scheme, hs.Scheme = "http", "https"
	name := u.Host + u.EscapedPath()
	if u.RawQuery != "" {
		name += "?" + u.RawQuery
	}
	return Site{Name: name, HTTP: &h, HTTPS: &hs}, nil
}

// SiteResult is every load of one site.
type SiteResult struct {
	Site  string `json:"site"`
	Loads []Load `json:"loads"`
}

// Unresponsive is a site the measurement gave up on, and why.
type Unresponsive struct {
	Site   string `json:"site"`
	Scheme string `json:"scheme,omitempty"`
	Mode   Mode   `json:"mode,omitempty"`
	Reason string `json:"reason"`
}

// Report is the outcome of a measurement.
type Report struct {
	Started      time.Time      `json:"started"`
	Finished     time.Time      `json:"finished"`
	Runs         int            `json:"runs"`
	Modes        []Mode         `json:"modes"`
	Parallel     int            `json:"parallel"`
	Sites        []SiteResult   `json:"sites"`
	Unresponsive []Unresponsive `json:"unresponsive"`
	Aggregates   Aggregates     `json:"aggregates"`
}

// Measure loads every site Runs times per scheme and mode and aggregates
// the overhead. A site whose first load fails over either scheme is listed
// as unresponsive and not retried; later failures are recorded in the
// loads and left out of the aggregates. Measure returns early, with what it
// has, if ctx ends.
func (m *Meter) Measure(ctx context.Context, sites []Site) *Report {
	rep := &Report{Started: time.Now(), Runs: m.opts.Runs, Modes: m.opts.Modes, Parallel: m.opts.Parallel}
	results := make([]SiteResult, len(sites))
	unresp := make([][]Unresponsive, len(sites))
	prog := newProgress(m.opts.Progress, int64(len(sites)*len(m.opts.Modes)*m.opts.Runs*2))
	defer prog.finish()

	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < m.opts.Concurrency && w < len(sites); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if ctx.Err() != nil {
					continue // reported below as not measured
				}
				results[i], unresp[i] = m.measureSite(ctx, sites[i], prog)
			}
		}()
	}
feed:
	for i := range sites {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	for i := range sites {
		if results[i].Site == "" {
			results[i].Site = sites[i].Name // never started: ctx ended
			unresp[i] = []Unresponsive{{Site: sites[i].Name, Reason: "not measured: " + context.Cause(ctx).Error()}}
			prog.skip(int64(len(m.opts.Modes) * m.opts.Runs * 2))
		}
		rep.Sites = append(rep.Sites, results[i])
		rep.Unresponsive = append(rep.Unresponsive, unresp[i]...)
	}
	rep.Aggregates = Aggregate(rep.Sites, m.opts.Modes)
	rep.Finished = time.Now()
	return rep
}

func (m *Meter) measureSite(ctx context.Context, s Site, prog *progress) (SiteResult, []Unresponsive) {
	res := SiteResult{Site: s.Name}
	var out []Unresponsive
	for mi, mode := range m.opts.Modes {
		ok := 0
		for run := 0; run < m.opts.Runs; run++ {
			if ctx.Err() != nil {
				out = append(out, Unresponsive{Site: s.Name, Mode: mode, Reason: fmt.Sprintf("interrupted after %d runs: %v", run, context.Cause(ctx))})
				prog.skip(int64(2 * (m.opts.Runs - run)))
				break
			}
			// Alternate which scheme goes first so that drift in the path
			// weighs on both equally.
			order := []*url.URL{s.HTTP, s.HTTPS}
			if run%2 == 1 {
				order[0], order[1] = order[1], order[0]
			}
			var pair [2]Load
			for i, u := range order {
				pair[i] = m.LoadPage(ctx, u, mode)
				pair[i].Run = run
				prog.done(1)
			}
			res.Loads = append(res.Loads, pair[0], pair[1])
			if pair[0].OK() && pair[1].OK() {
				ok++
			}
			if run == 0 && ok == 0 && ctx.Err() == nil {
				// The thesis's rule: a site that does not answer is listed
				// as unresponsive, not measured.
				for _, l := range pair {
					if !l.OK() {
						out = append(out, Unresponsive{Site: s.Name, Scheme: l.Scheme, Mode: mode, Reason: l.Err})
					}
				}
				prog.unresponsive()
				prog.skip(int64(2 * ((len(m.opts.Modes)-mi)*m.opts.Runs - 1)))
				return res, out
			}
		}
		if ok == 0 && ctx.Err() == nil {
			out = append(out, Unresponsive{Site: s.Name, Mode: mode, Reason: "no run loaded over both schemes"})
		}
	}
	return res, out
}

// progress prints a line to w at most once a second.
type progress struct {
	w                io.Writer
	total, n, unresp atomic.Int64
	start            time.Time
	mu               sync.Mutex
	last             time.Time
}

func newProgress(w io.Writer, total int64) *progress {
	p := &progress{w: w, start: time.Now()}
	p.total.Store(total)
	return p
}

func (p *progress) done(n int64) { p.n.Add(n); p.print(false) }

func (p *progress) skip(n int64) { p.total.Add(-n); p.print(false) }

func (p *progress) unresponsive() { p.unresp.Add(1) }

func (p *progress) finish() { p.print(true) }

func (p *progress) print(force bool) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if !force && now.Sub(p.last) < time.Second {
		return
	}
	p.last = now
	n, total := p.n.Load(), p.total.Load()
	el := now.Sub(p.start)
	rate := float64(n) / el.Seconds()
	eta := "?"
	if rate > 0 && total >= n {
		eta = (time.Duration(float64(total-n)/rate*1e9) * time.Nanosecond).Round(time.Second).String()
	}
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(n) / float64(total)
	}
	fmt.Fprintf(p.w, "overhead: %d/%d page loads (%.0f%%), %d unresponsive, %.1f loads/s, elapsed %s, ETA %s\n",
		n, total, pct, p.unresp.Load(), rate, el.Round(time.Second), eta)
}
