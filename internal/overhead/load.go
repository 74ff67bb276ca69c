package overhead

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/probe"
)

// Phases are where the time of one request went, as net/http/httptrace saw
// it. A phase that did not happen (no DNS for an IP literal, no connect or
// TLS on a reused connection) is zero.
type Phases struct {
	DNS       time.Duration `json:"dns_ns"`
	Connect   time.Duration `json:"connect_ns"`
	TLS       time.Duration `json:"tls_ns"`
	FirstByte time.Duration `json:"first_byte_ns"` // connection in hand → first response byte
	Transfer  time.Duration `json:"transfer_ns"`   // first response byte → last body byte
	Total     time.Duration `json:"total_ns"`
}

func (p *Phases) add(q Phases) {
	p.DNS += q.DNS
	p.Connect += q.Connect
	p.TLS += q.TLS
	p.FirstByte += q.FirstByte
	p.Transfer += q.Transfer
	p.Total += q.Total
}

// Object is one request of a page load: the page itself, a redirect hop or
// a sub-resource.
type Object struct {
	URL        string `json:"url"`
	Kind       string `json:"kind"`
	Status     int    `json:"status,omitempty"`
	RedirectTo string `json:"redirect_to,omitempty"`
	Bytes      int64  `json:"bytes"`     // body bytes as received (compressed if the server compressed)
	Reused     bool   `json:"reused"`    // on a connection opened by an earlier request
	Handshake  bool   `json:"handshake"` // a TLS handshake was completed for this request
	TLSVersion string `json:"tls_version,omitempty"`
	Phases     Phases `json:"phases"`
	// FromCSS is set on an object found in CSS (a url() or @import in a
	// stylesheet, <style> block or style attribute), and Via names the
	// stylesheet that referenced it (empty for the page's inline CSS).
	FromCSS bool   `json:"from_css,omitempty"`
	Via     string `json:"via,omitempty"`
	Err     string `json:"error,omitempty"`
}

// Load is one download of a whole page over one scheme in one mode.
type Load struct {
	Scheme     string        `json:"scheme"`
	Mode       Mode          `json:"mode"`
	Run        int           `json:"run"`
	URL        string        `json:"url"`
	FinalURL   string        `json:"final_url,omitempty"`
	Redirects  []string      `json:"redirects,omitempty"` // page URLs answered with a redirect, in order
	Status     int           `json:"status,omitempty"`    // of the final page response
	Start      time.Time     `json:"start"`
	Duration   time.Duration `json:"duration_ns"` // first request sent → last byte of the last object
	Bytes      int64         `json:"bytes"`
	Requests   int           `json:"requests"`
	CSSObjects int           `json:"css_objects"`              // sub-resources found in CSS rather than in the HTML's markup
	Failed     int           `json:"failed_objects,omitempty"` // sub-resources that failed (the load still counts)
	Conns      int           `json:"conns"`                    // TCP connections opened
	Handshakes int           `json:"handshakes"`               // TLS handshakes completed
	Phases     Phases        `json:"phases"`                   // summed over the requests
	Objects    []Object      `json:"objects,omitempty"`        // only with Options.KeepObjects
	Err        string        `json:"error,omitempty"`
}

// OK reports whether the page loaded.
func (l *Load) OK() bool { return l.Err == "" }

// ErrForbiddenAddress is returned (wrapped) when a page or object resolves
// to a non-public address and private addresses are not allowed.
var ErrForbiddenAddress = probe.ErrForbiddenAddress

// pageLoad is the state of one page load: its own Transport, so nothing
// (connections, TLS sessions) carries over from one load to the next.
type pageLoad struct {
	m      *Meter
	mode   Mode
	client *http.Client
	tr     *http.Transport
	conns  atomic.Int32
	bytes  atomic.Int64
	// overBudget is set when the load's objects together exceed
	// MaxPageBytes; the load then fails.
	overBudget atomic.Bool
}

func (m *Meter) newPageLoad(mode Mode) *pageLoad {
	pl := &pageLoad{m: m, mode: mode}
	tc := &tls.Config{
		RootCAs:            m.opts.RootCAs,
		InsecureSkipVerify: m.opts.InsecureSkipVerify,
		MinVersion:         tls.VersionTLS12,
		MaxVersion:         m.opts.MaxTLSVersion,
	}
	if mode == Persistent {
		// A browser resumes TLS sessions between the connections of one
		// page; nothing survives into the next load.
		tc.ClientSessionCache = tls.NewLRUClientSessionCache(16)
	}
	pl.tr = &http.Transport{
		Proxy:                  nil, // measure the path to the site, not to a proxy from the environment
		DialContext:            pl.dial,
		TLSClientConfig:        tc,
		TLSHandshakeTimeout:    m.opts.PageTimeout,
		DisableKeepAlives:      mode == NonPersistent,
		DisableCompression:     true, // we ask for gzip ourselves so Bytes counts what crossed the wire
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConnsPerHost:    m.opts.Parallel,
		// HTTP/1.1 only, so both schemes speak the same protocol and the
		// difference is TLS.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	if mode == Persistent {
		// Like a browser's per-host limit: at most Parallel connections to
		// a host, whatever the timing of dials and reuse. (Non-persistent
		// loads are bounded by Parallel requests in flight already; a limit
		// here would make a request wait for the previous connection's
		// close.)
		pl.tr.MaxConnsPerHost = m.opts.Parallel
	}
	pl.client = &http.Client{
		Transport: pl.tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // followed by hand, to time and report each hop
		},
	}
	return pl
}

// dial resolves (through Options.Lookup if set) and connects, refusing
// non-public addresses unless allowed, and reports DNS and connect phases
// to the request's httptrace.
func (pl *pageLoad) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", addr)
	}
	trace := httptrace.ContextClientTrace(ctx)
	var addrs []netip.AddrPort
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.AddrPort{netip.AddrPortFrom(ip.Unmap(), uint16(port))}
	} else if pl.m.opts.Lookup != nil {
		if trace != nil && trace.DNSStart != nil {
			trace.DNSStart(httptrace.DNSStartInfo{Host: host})
		}
		addrs, err = pl.m.opts.Lookup(ctx, host, port)
		if trace != nil && trace.DNSDone != nil {
			trace.DNSDone(httptrace.DNSDoneInfo{Err: err})
		}
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", probe.ErrResolve, host, err)
		}
	} else {
		// The resolver reports DNS phases to the trace itself.
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", probe.ErrResolve, host, err)
		}
		for _, ip := range ips {
			addrs = append(addrs, netip.AddrPortFrom(ip.Unmap(), uint16(port)))
		}
	}
	var lastErr error
	var d net.Dialer
	for _, a := range addrs {
		if err := pl.allowed(a.Addr()); err != nil {
			lastErr = err
			continue
		}
		c, err := d.DialContext(ctx, network, a.String())
		if err != nil {
			lastErr = fmt.Errorf("%w to %s: %w", probe.ErrConnect, a, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		// Check the socket's peer too: it is what the kernel connected to.
		if ra, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			if err := pl.allowed(ra.AddrPort().Addr()); err != nil {
				c.Close()
				lastErr = err
				continue
			}
		}
		pl.conns.Add(1)
		return c, nil
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("%w: %s has no addresses", probe.ErrResolve, host)
	}
	return nil, lastErr
}

func (pl *pageLoad) allowed(a netip.Addr) error {
	if pl.m.opts.AllowPrivate {
		return nil
	}
	if reason := probe.NonPublic(a); reason != "" {
		return fmt.Errorf("%w: refusing to connect to %s (%s); pass --allow-private to measure private or loopback sites", ErrForbiddenAddress, a, reason)
	}
	return nil
}

// objTrace collects one request's httptrace events. Hooks may run on the
// transport's dialing goroutine, hence the lock.
type objTrace struct {
	mu                  sync.Mutex
	dnsStart, dnsDone   time.Time
	connStart, connDone time.Time
	tlsStart, tlsDone   time.Time
	gotConn, firstByte  time.Time
	reused, handshook   bool
	tlsVersion          uint16
}

func (o *objTrace) clientTrace() *httptrace.ClientTrace {
	set := func(t *time.Time, first bool) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if first && !t.IsZero() {
			return
		}
		*t = time.Now()
	}
	return &httptrace.ClientTrace{
		DNSStart:          func(httptrace.DNSStartInfo) { set(&o.dnsStart, true) },
		DNSDone:           func(httptrace.DNSDoneInfo) { set(&o.dnsDone, false) },
		ConnectStart:      func(string, string) { set(&o.connStart, true) },
		ConnectDone:       func(string, string, error) { set(&o.connDone, false) },
		TLSHandshakeStart: func() { set(&o.tlsStart, true) },
		TLSHandshakeDone: func(st tls.ConnectionState, err error) {
			set(&o.tlsDone, false)
			o.mu.Lock()
			defer o.mu.Unlock()
			if err == nil {
				o.handshook = true
				o.tlsVersion = st.Version
			}
		},
		GotConn: func(i httptrace.GotConnInfo) {
			set(&o.gotConn, true)
			o.mu.Lock()
			defer o.mu.Unlock()
			o.reused = i.Reused
			if st, ok := i.Conn.(*tls.Conn); ok && o.tlsVersion == 0 {
				o.tlsVersion = st.ConnectionState().Version
			}
		},
		GotFirstResponseByte: func() { set(&o.firstByte, true) },
	}
}

func span(a, b time.Time) time.Duration {
	if a.IsZero() || b.IsZero() || b.Before(a) {
		return 0
	}
	return b.Sub(a)
}

func (o *objTrace) phases(start, end time.Time) Phases {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := Phases{
		DNS:       span(o.dnsStart, o.dnsDone),
		Connect:   span(o.connStart, o.connDone),
		TLS:       span(o.tlsStart, o.tlsDone),
		FirstByte: span(o.gotConn, o.firstByte),
		Transfer:  span(o.firstByte, end),
		Total:     span(start, end),
	}
	if o.reused {
		// A reused connection's dial and handshake belong to the request
		// that opened it.
		p.DNS, p.Connect, p.TLS = 0, 0, 0
	}
	return p
}

// get performs one request and reads its body (keeping it if keep), with
// per-phase timings.
func (pl *pageLoad) get(ctx context.Context, u *url.URL, kind string, keep bool) (Object, *http.Response, []byte) {
	obj := Object{URL: u.String(), Kind: kind}
	ot := &objTrace{}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, ot.clientTrace()), http.MethodGet, u.String(), nil)
	if err != nil {
		obj.Err = err.Error()
		return obj, nil, nil
	}
	req.Header.Set("User-Agent", pl.m.opts.UserAgent)
	req.Header.Set("Accept-Encoding", "gzip")
	start := time.Now()
	resp, err := pl.client.Do(req)
	if err != nil {
		obj.Phases = ot.phases(start, time.Now())
		obj.Err = describe(ctx, err)
		return obj, nil, nil
	}
	defer resp.Body.Close()
	obj.Status = resp.StatusCode
	var buf bytes.Buffer
	var dst io.Writer = io.Discard
	if keep {
		dst = &buf
	}
	limit := pl.m.opts.MaxObjectBytes
	n, err := io.Copy(dst, io.LimitReader(resp.Body, limit+1))
	end := time.Now()
	obj.Bytes = n
	obj.Phases = ot.phases(start, end)
	ot.mu.Lock()
	obj.Reused = ot.reused
	obj.Handshake = ot.handshook
	if ot.tlsVersion != 0 {
		obj.TLSVersion = tls.VersionName(ot.tlsVersion)
	}
	ot.mu.Unlock()
	switch {
	case err != nil:
		obj.Err = "reading body: " + describe(ctx, err)
	case n > limit:
		obj.Err = fmt.Sprintf("body exceeds the %d-byte object limit", limit)
	case pl.bytes.Add(n) > pl.m.opts.MaxPageBytes:
		pl.overBudget.Store(true)
		obj.Err = fmt.Sprintf("the page's objects together exceed the %d-byte page limit", pl.m.opts.MaxPageBytes)
	}
	if keep && obj.Err == "" && resp.Header.Get("Content-Encoding") == "gzip" {
		body, err := gunzip(buf.Bytes(), limit)
		if err != nil {
			obj.Err = "gzip body: " + err.Error()
		}
		return obj, resp, body
	}
	return obj, resp, buf.Bytes()
}

func gunzip(b []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("decompresses to more than the %d-byte object limit", limit)
	}
	return out, nil
}

// fetch requests u and follows its redirects, returning every hop, the
// final URL, (if keep) the final body and its Content-Type.
func (pl *pageLoad) fetch(ctx context.Context, u *url.URL, kind string, keep bool) ([]Object, *url.URL, []byte, string) {
	var hops []Object
	for i := 0; ; i++ {
		obj, resp, body := pl.get(ctx, u, kind, keep)
		if obj.Err != "" || resp == nil || !isRedirect(resp.StatusCode) {
			hops = append(hops, obj)
			ctype := ""
			if resp != nil {
				ctype = resp.Header.Get("Content-Type")
			}
			return hops, u, body, ctype
		}
		loc := resp.Header.Get("Location")
		next, err := u.Parse(loc)
		switch {
		case loc == "":
			obj.Err = fmt.Sprintf("status %d redirect without a Location header", resp.StatusCode)
		case err != nil:
			obj.Err = fmt.Sprintf("redirect to malformed Location %q: %v", trunc(loc, 200), err)
		case next.Scheme != "http" && next.Scheme != "https":
			obj.Err = fmt.Sprintf("redirect to unsupported scheme in %q", trunc(loc, 200))
		case i >= pl.m.opts.MaxRedirects:
			obj.Err = fmt.Sprintf("more than %d redirects", pl.m.opts.MaxRedirects)
		}
		if obj.Err != "" {
			hops = append(hops, obj)
			return hops, u, nil, ""
		}
		next.Fragment, next.RawFragment = "", ""
		obj.RedirectTo = next.String()
		hops = append(hops, obj)
		u = next
	}
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// describe words a request error, naming the page timeout when that is
// what ended it.
func describe(ctx context.Context, err error) string {
	// The URL is recorded beside the error already.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "page load timed out: " + err.Error()
	}
	return err.Error()
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// LoadPage downloads the page at u once, in mode: the HTML (following
// redirects) and then every image, script, stylesheet and icon it
// references, Options.Parallel at a time. Unless Options.IgnoreCSS is set,
// what CSS references is fetched too, as a browser would: the url()s and
// @imports of the page's <style> blocks and style attributes, and of every
// stylesheet as it arrives (see fetchSubresources). Sub-resource failures
// are counted, as a browser shows a page with a broken image; the load
// fails only when the page itself does not arrive with a 2xx status, the
// page timeout passes or the byte budget is exceeded.
func (m *Meter) LoadPage(ctx context.Context, u *url.URL, mode Mode) Load {
	ctx, cancel := context.WithTimeout(ctx, m.opts.PageTimeout)
	defer cancel()
	pl := m.newPageLoad(mode)
	defer pl.tr.CloseIdleConnections()

	ld := Load{Scheme: u.Scheme, Mode: mode, URL: u.String(), Start: time.Now()}
	var objs []Object
	hops, final, body, _ := pl.fetch(ctx, u, KindPage, true)
	objs = append(objs, hops...)
	last := hops[len(hops)-1]
	for _, h := range hops[:len(hops)-1] {
		ld.Redirects = append(ld.Redirects, h.URL)
	}
	ld.FinalURL, ld.Status = final.String(), last.Status
	switch {
	case last.Err != "":
		ld.Err = last.Err
	case last.Status < 200 || last.Status > 299:
		ld.Err = fmt.Sprintf("page answered HTTP status %d", last.Status)
	}
	if ld.Err == "" {
		refs := extractRefs(final, body, m.opts.MaxObjects, !m.opts.IgnoreCSS)
		for _, sub := range pl.fetchSubresources(ctx, refs) {
			objs = append(objs, sub.hops...)
			if l := sub.hops[len(sub.hops)-1]; l.Err != "" || l.Status >= 400 {
				ld.Failed++
			}
			if sub.ref.CSS {
				ld.CSSObjects++
			}
		}
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			ld.Err = fmt.Sprintf("page load exceeded the %v page timeout", m.opts.PageTimeout)
		case pl.overBudget.Load():
			ld.Err = fmt.Sprintf("the page's objects together exceed the %d-byte page limit", m.opts.MaxPageBytes)
		}
	}
	ld.Duration = time.Since(ld.Start)
	ld.Conns = int(pl.conns.Load())
	for _, o := range objs {
		ld.Requests++
		ld.Bytes += o.Bytes
		ld.Phases.add(o.Phases)
		if o.Handshake {
			ld.Handshakes++
		}
	}
	if m.opts.KeepObjects {
		ld.Objects = objs
	}
	return ld
}

// subresource is one object of a page load other than the page.
type subresource struct {
	ref   Ref
	via   string // the stylesheet whose CSS referenced it; "" for the page
	depth int    // a stylesheet's @import depth: 0 for one the page links
	hops  []Object
}

// fetchSubresources fetches refs and what their CSS references, at most
// Options.Parallel at a time, and returns them in the order they were
// found: refs first, then each stylesheet's references as it arrived.
//
// A stylesheet (requested by <link rel=stylesheet> or @import) is read as
// CSS when it arrives with a 2xx status and a text/css Content-Type (or
// none): a browser in standards mode does not apply one served as, say, an
// HTML error page. Its url()s and @imports, resolved against its final URL,
// join the queue. Within the load every URL is fetched once (so an @import
// cycle ends), the number of sub-resources stays within
// Options.MaxObjects, and @imports deeper than DefaultMaxImportDepth are
// not followed. Parsing stops once the load is over its byte budget or out
// of time.
func (pl *pageLoad) fetchSubresources(ctx context.Context, refs []Ref) []*subresource {
	opts := &pl.m.opts
	var (
		mu     sync.Mutex
		cond   = sync.NewCond(&mu)
		items  []*subresource // in the order found; items[next:] wait to be fetched
		next   int
		active int
		seen   = map[string]bool{}
	)
	// push queues r unless it was queued before or the load has its
	// MaxObjects already. mu is held.
	push := func(r Ref, via string, depth int) {
		k := r.URL.String()
		if seen[k] || len(items) >= opts.MaxObjects {
			return
		}
		if r.Kind == KindStylesheet && depth > DefaultMaxImportDepth {
			return
		}
		seen[k] = true
		items = append(items, &subresource{ref: r, via: via, depth: depth})
	}
	for _, r := range refs {
		depth := 0
		if r.CSS {
			depth = 1 // imported by the page's own <style>
		}
		push(r, "", depth)
	}
	worker := func() {
		mu.Lock()
		defer mu.Unlock()
		for {
			for next == len(items) && active > 0 {
				cond.Wait() // a stylesheet in flight may queue more
			}
			if next == len(items) {
				return // nothing queued, nothing in flight: done
			}
			it := items[next]
			next++
			active++
			mu.Unlock()

			parse := it.ref.Kind == KindStylesheet && !opts.IgnoreCSS
			hops, final, body, ctype := pl.fetch(ctx, it.ref.URL, it.ref.Kind, parse)
			last := hops[len(hops)-1]
			var found []Ref
			if parse && last.Err == "" && last.Status >= 200 && last.Status <= 299 && isCSSType(ctype) &&
				ctx.Err() == nil && !pl.overBudget.Load() {
				// At most MaxObjects: ExtractCSSRefs de-duplicates
				// within the sheet, so however many of them were queued
				// before, that is enough to fill what is left.
				found = ExtractCSSRefs(final, body, opts.MaxObjects)
			}
			for i := range hops {
				hops[i].FromCSS, hops[i].Via = it.ref.CSS, it.via
			}

			mu.Lock()
			it.hops = hops
			for _, r := range found {
				push(r, final.String(), it.depth+1)
			}
			active--
			cond.Broadcast()
		}
	}
	var wg sync.WaitGroup
	for range opts.Parallel {
		wg.Go(worker)
	}
	wg.Wait()
	return items
}

// isCSSType reports whether a Content-Type header lets a browser apply the
// body as a stylesheet: text/css, or no type at all.
func isCSSType(ctype string) bool {
	if strings.TrimSpace(ctype) == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ctype)
	return err == nil && mt == "text/css"
}
