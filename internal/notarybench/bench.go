package notarybench

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// Options configure a run.
type Options struct {
	Duration    time.Duration // per throughput phase; 0 means 5 s
	Concurrency int           // throughput clients; 0 means 64
	Samples     int           // latency samples per row; 0 means 30
	Progress    io.Writer     // phase names as they start; nil for none
}

// Report is the whole run.
type Report struct {
	Cached           Stats     `json:"cached"`
	CachedCeiling    Stats     `json:"cached_ceiling"` // trivial HTTPS handler, same server stack
	CachedRatio      float64   `json:"cached_ratio"`
	Uncached         Stats     `json:"uncached"`
	UncachedCeil     Stats     `json:"uncached_ceiling"` // raw TLS handshakes to the same site
	UncachedRatio    float64   `json:"uncached_ratio"`
	Latency          []Latency `json:"latency"`
	PaperCachedRPS   float64   `json:"paper_cached_rps"`
	PaperUncachedRPS float64   `json:"paper_uncached_rps"`
}

// Latency is one row of Forced Perspectives' Table 4.
type Latency struct {
	Event    string  `json:"event"`
	Notaries int     `json:"notaries"`
	RTTms    float64 `json:"rtt_ms"`
	Samples  int     `json:"samples"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
	MeanMS   float64 `json:"mean_ms"`
	PaperMS  float64 `json:"paper_ms"`
}

func (o *Options) defaults() {
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.Samples <= 0 {
		o.Samples = 30
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// env is the testbed a run uses.
type env struct {
	ca    *testbed.CA
	site  *testbed.Site
	path  *testbed.Resolver
	fp    string // the site's leaf SHA-1, Convergence form
	close []func()
}

func (e *env) cleanup() {
	for i := len(e.close) - 1; i >= 0; i-- {
		e.close[i]()
	}
}

func newEnv() (*env, error) {
	e := &env{path: testbed.NewResolver()}
	var err error
	if e.ca, err = testbed.NewRootCA("Bench Root", testbed.ECDSAP256); err != nil {
		return nil, err
	}
	leaf, err := e.ca.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}})
	if err != nil {
		return nil, err
	}
	if e.site, err = testbed.StartSite("site.test", leaf, nil); err != nil {
		return nil, err
	}
	e.close = append(e.close, func() { e.site.Close() })
	e.path.Set("site.test", e.site.Addr)
	sum := sha1.Sum(leaf.Cert.Raw)
	e.fp = probe.ColonHex(sum[:])
	return e, nil
}

// loopback lifts cfg's per-client bounds for a benchmark of the given
// number of workers: a benchmark drives the notary from one loopback
// address with as many connections and requests at once as it has workers,
// which a public notary's per-address caps are there to refuse. The caps
// in total stay.
func loopback(cfg notary.Config, workers int) notary.Config {
	cfg.Conns.MaxConnsPerClient = max(2*workers, httplimit.DefaultMaxConnsPerClient)
	cfg.Conns.MaxConns = max(cfg.Conns.MaxConnsPerClient, httplimit.DefaultMaxConns())
	cfg.MaxRequestsPerClient = math.MaxInt32 // the whole pool
	return cfg
}

// pinned returns an HTTP client that trusts exactly cert, with keep-alive
// connections for as many workers as will share it.
func pinned(cert *x509.Certificate, conns int, keepAlive bool) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: conns,
		DisableKeepAlives:   !keepAlive,
		TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true,
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				if len(raw) == 0 || string(raw[0]) != string(cert.Raw) {
					return fmt.Errorf("notary certificate is not the pinned one")
				}
				return nil
			},
		},
	}}
}

func post(ctx context.Context, c *http.Client, addr netip.AddrPort, target, fp string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", "https://"+addr.String()+"/target/"+target, strings.NewReader("fingerprint="+fp))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Run performs every phase.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	e, err := newEnv()
	if err != nil {
		return nil, err
	}
	defer e.cleanup()
	r := &Report{PaperCachedRPS: 1051, PaperUncachedRPS: 199}

	// Cached: every request matches the history.
	fmt.Fprintln(o.Progress, "phase 1/5: cached notary throughput")
	n, err := testbed.StartNotary(testbed.NotaryOptions{Name: "bench", Path: e.path, Config: loopback(notary.Config{}, o.Concurrency)})
	if err != nil {
		return nil, err
	}
	e.close = append(e.close, func() { n.Close() })
	c := pinned(n.Identity.Cert, o.Concurrency, true)
	if code, err := post(ctx, c, n.Addr, "site.test+443", e.fp); err != nil || code != 200 {
		return nil, fmt.Errorf("warm-up check: status %d, %v", code, err)
	}
	r.Cached = load(ctx, "notary, cached", o.Concurrency, o.Duration, func(ctx context.Context, _ int) (int, error) {
		return post(ctx, c, n.Addr, "site.test+443", e.fp)
	})

	fmt.Fprintln(o.Progress, "phase 2/5: ceiling: trivial HTTPS handler on the same server stack")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	trivial := notary.NewServer(n.Identity, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	go trivial.ServeTLS(ln, "", "")
	e.close = append(e.close, func() { trivial.Close() })
	taddr := ln.Addr().(*net.TCPAddr).AddrPort()
	r.CachedCeiling = load(ctx, "trivial HTTPS handler", o.Concurrency, o.Duration, func(ctx context.Context, _ int) (int, error) {
		return post(ctx, c, taddr, "site.test+443", e.fp)
	})
	r.CachedRatio = r.Cached.PerSecond / r.CachedCeiling.PerSecond

	// Uncached: every request probes. Distinct names per request defeat
	// coalescing, so each request costs one probe of the site.
	fmt.Fprintln(o.Progress, "phase 3/5: uncached notary throughput (every request probes)")
	for i := 0; i < 4096; i++ {
		e.path.Set(fmt.Sprintf("u%d.test", i), e.site.Addr)
	}
	un, err := testbed.StartNotary(testbed.NotaryOptions{Name: "bench-uncached", Path: e.path,
		// Every worker connects from 127.0.0.1, one client address to the
		// notary: its per-client probe share would bound the phase instead
		// of the notary's probe throughput.
		Config: loopback(notary.Config{MaxAge: time.Nanosecond, MaxProbes: 256, MaxQueue: 1024, MaxProbesPerClient: 256}, o.Concurrency)})
	if err != nil {
		return nil, err
	}
	e.close = append(e.close, func() { un.Close() })
	uc := pinned(un.Identity.Cert, o.Concurrency, true)
	var mu sync.Mutex
	next := 0
	r.Uncached = load(ctx, "notary, uncached", o.Concurrency, o.Duration, func(ctx context.Context, _ int) (int, error) {
		mu.Lock()
		i := next % 4096
		next++
		mu.Unlock()
		return post(ctx, uc, un.Addr, fmt.Sprintf("u%d.test+443", i), e.fp)
	})

	fmt.Fprintln(o.Progress, "phase 4/5: ceiling: raw TLS handshakes to the same site")
	r.UncachedCeil = load(ctx, "raw TLS handshakes", o.Concurrency, o.Duration, func(ctx context.Context, _ int) (int, error) {
		d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, ServerName: "site.test", CurvePreferences: probe.CurvePreferences()}}
		conn, err := d.DialContext(ctx, "tcp", e.site.Addr.String())
		if err != nil {
			return 0, err
		}
		conn.Close()
		return 0, nil
	})
	r.UncachedRatio = r.Uncached.PerSecond / r.UncachedCeil.PerSecond

	fmt.Fprintln(o.Progress, "phase 5/5: client latency through the delay proxy (Forced Perspectives, Table 4)")
	rows := []struct {
		event    string
		notaries int
		rtt      time.Duration
		miss     bool
		paper    float64
	}{
		{"notary cache hit", 3, testbed.ContinentalRTT, false, 743},
		{"notary cache hit", 8, testbed.GlobalRTT, false, 1508},
		{"notary cache miss", 3, testbed.ContinentalRTT, true, 1006},
		{"notary cache miss", 8, testbed.GlobalRTT, true, 1790},
	}
	for _, row := range rows {
		l, err := latencyRow(ctx, e, row.notaries, row.rtt, row.miss, o.Samples)
		if err != nil {
			return nil, err
		}
		l.Event, l.PaperMS = row.event, row.paper
		r.Latency = append(r.Latency, l)
	}
	return r, nil
}

// latencyRow measures a client asking k notaries at distance rtt in
// parallel, as a fresh client process would (a new TLS connection to each
// notary every time). On a miss the notaries must probe the site, which is
// at the same distance from them.
func latencyRow(ctx context.Context, e *env, k int, rtt time.Duration, miss bool, samples int) (Latency, error) {
	path := e.path
	if miss {
		p, err := testbed.StartDelayProxy(e.site.Addr.String(), rtt)
		if err != nil {
			return Latency{}, err
		}
		defer p.Close()
		path = testbed.NewResolver()
		path.Set("site.test", p.Addr)
	}
	cfg := notary.Config{}
	if miss {
		cfg.MaxAge = time.Nanosecond
	}
	var ns []*testbed.Notary
	defer func() {
		for _, n := range ns {
			n.Close()
		}
	}()
	for i := 0; i < k; i++ {
		n, err := testbed.StartNotary(testbed.NotaryOptions{Name: fmt.Sprintf("lat%d", i), Path: path, RTT: rtt, Config: cfg})
		if err != nil {
			return Latency{}, err
		}
		ns = append(ns, n)
	}
	ask := func() (time.Duration, error) {
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(ns))
		for i, n := range ns {
			wg.Add(1)
			go func(i int, n *testbed.Notary) {
				defer wg.Done()
				c := pinned(n.Identity.Cert, 1, false)
				code, err := post(ctx, c, n.Addr, "site.test+443", e.fp)
				if err == nil && code != 200 {
					err = fmt.Errorf("notary %s answered %d", n.Name, code)
				}
				errs[i] = err
			}(i, n)
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return 0, err
			}
		}
		return time.Since(t0), nil
	}
	if _, err := ask(); err != nil { // warm the notaries' histories
		return Latency{}, err
	}
	var lat []time.Duration
	var sum time.Duration
	for i := 0; i < samples; i++ {
		d, err := ask()
		if err != nil {
			return Latency{}, err
		}
		lat = append(lat, d)
		sum += d
	}
	return Latency{
		Notaries: k, RTTms: float64(rtt) / float64(time.Millisecond), Samples: samples,
		P50ms: percentileMS(lat, 0.5), P99ms: percentileMS(lat, 0.99),
		MeanMS: float64(sum) / float64(samples) / float64(time.Millisecond),
	}, nil
}
