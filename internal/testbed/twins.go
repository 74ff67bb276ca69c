package testbed

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// TwinOptions describe a pair of twin sites: the same page served over
// HTTP and over HTTPS, so that the difference in download time between the
// two is what TLS costs and nothing else.
type TwinOptions struct {
	// Host is the name both twins answer for and the HTTPS leaf certifies;
	// default "twin.test".
	Host string
	// Objects is how many sub-resources the page references (images,
	// scripts and stylesheets in turn).
	Objects int
	// ObjectSize is the body size of each sub-resource in bytes; default 1024.
	ObjectSize int
	// PageSize pads the HTML page to at least this many bytes.
	PageSize int
	// CSSImages, when positive, gives the page CSS that references this
	// many background images (TwinCSSImage(i), ObjectSize bytes each) the
	// way sites do: from a linked stylesheet (TwinMainCSS), from a
	// stylesheet that one @imports (TwinImportedCSS), from a <style> block
	// and from style attributes, alongside references that must not be
	// fetched (comments, data: URIs, duplicates, an @import cycle).
	CSSImages int
	// Redirect makes "/" answer 302 to "/index.html" on the same scheme, a
	// site whose front page costs an extra request.
	Redirect bool
	// UpgradeHTTP makes the HTTP twin's "/" answer 301 to "https://Host/",
	// as sites that force HTTPS do: the HTTP load then includes the HTTPS one.
	UpgradeHTTP bool
	// TLSVersion pins the HTTPS twin to one version: tls.VersionTLS12 or
	// tls.VersionTLS13 (the default).
	TLSVersion uint16
	// RTT places each twin behind its own DelayProxy at this round-trip
	// time; 0 serves them directly.
	RTT time.Duration
	// CA issues the HTTPS certificate; nil creates a fresh root.
	CA *CA
}

// Twins are an HTTP site and an HTTPS site serving identical content.
type Twins struct {
	Host string
	// HTTP and HTTPS are where clients connect: the delay proxies when RTT
	// is set, the servers themselves otherwise.
	HTTP, HTTPS netip.AddrPort
	CA          *CA
	TLSVersion  uint16
	RTT         time.Duration
	Objects     int
	CSSImages   int

	page     []byte
	object   []byte
	css      *twinCSS
	hitsMu   sync.Mutex
	hits     map[string]int64 // "scheme path" → requests
	servers  []*http.Server
	proxies  []*DelayProxy
	httpNew  atomic.Int64
	httpsNew atomic.Int64
	requests atomic.Int64
}

// StartTwins starts the twins on loopback (and their delay proxies if
// o.RTT is set).
func StartTwins(o TwinOptions) (t *Twins, err error) {
	if o.Host == "" {
		o.Host = "twin.test"
	}
	if o.Objects < 0 || o.CSSImages < 0 {
		return nil, fmt.Errorf("testbed: twins: negative object count %d or CSS image count %d", o.Objects, o.CSSImages)
	}
	if o.ObjectSize <= 0 {
		o.ObjectSize = 1024
	}
	switch o.TLSVersion {
	case 0:
		o.TLSVersion = tls.VersionTLS13
	case tls.VersionTLS12, tls.VersionTLS13:
	default:
		return nil, fmt.Errorf("testbed: twins: TLS version %#x is not 1.2 or 1.3", o.TLSVersion)
	}
	if o.CA == nil {
		if o.CA, err = NewRootCA("Twin Root CA", ECDSAP256); err != nil {
			return nil, err
		}
	}
	leaf, err := o.CA.Issue(LeafOptions{DNSNames: []string{o.Host}})
	if err != nil {
		return nil, err
	}
	t = &Twins{Host: o.Host, CA: o.CA, TLSVersion: o.TLSVersion, RTT: o.RTT, Objects: o.Objects, CSSImages: o.CSSImages, hits: map[string]int64{}}
	t.css = newTwinCSS(o.CSSImages)
	t.page = twinPage(o.Host, o.Objects, o.PageSize, t.css)
	t.object = make([]byte, o.ObjectSize)
	for i := range t.object {
		t.object[i] = 'a' + byte(i%26)
	}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()

	httpAddr, err := t.serve(t.handler(o, "http"), nil, &t.httpNew)
	if err != nil {
		return nil, err
	}
	cert := leaf.TLSCertificate()
	httpsAddr, err := t.serve(t.handler(o, "https"), &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   o.TLSVersion,
		MaxVersion:   o.TLSVersion,
	}, &t.httpsNew)
	if err != nil {
		return nil, err
	}
	t.HTTP, t.HTTPS = httpAddr, httpsAddr
	if o.RTT > 0 {
		for _, a := range []*netip.AddrPort{&t.HTTP, &t.HTTPS} {
			p, err := StartDelayProxy(a.String(), o.RTT)
			if err != nil {
				return nil, err
			}
			t.proxies = append(t.proxies, p)
			*a = p.Addr
		}
	}
	return t, nil
}

// serve starts one twin; tc nil means plain HTTP. Only HTTP/1.1 is offered,
// so that a client and curl speak the same protocol to it.
func (t *Twins) serve(h http.Handler, tc *tls.Config, newConns *atomic.Int64) (netip.AddrPort, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("testbed: twins: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          discardLog(),
		TLSConfig:         tc,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){}, // no HTTP/2
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				newConns.Add(1)
			}
		},
	}
	t.servers = append(t.servers, srv)
	if tc != nil {
		go srv.ServeTLS(ln, "", "")
	} else {
		go srv.Serve(ln)
	}
	return ln.Addr().(*net.TCPAddr).AddrPort(), nil
}

// twinObjectKinds are the sub-resource kinds a twin page references, in turn.
var twinObjectKinds = []struct{ ext, ctype, tag string }{
	{"png", "image/png", `<img src="/obj/%d.png" alt="">`},
	{"js", "text/javascript", `<script src="/obj/%d.js"></script>`},
	{"css", "text/css", `<link rel="stylesheet" href="/obj/%d.css">`},
}

func twinPage(host string, objects, size int, css *twinCSS) []byte {
	var b strings.Builder
	head, body := "", ""
	if css != nil {
		head, body = css.head, css.body
	}
	fmt.Fprintf(&b, "<!doctype html>\n<html><head><title>%s</title>\n%s</head><body>\n<h1>%s</h1>\n%s", host, head, host, body)
	for i := 0; i < objects; i++ {
		k := twinObjectKinds[i%len(twinObjectKinds)]
		fmt.Fprintf(&b, k.tag+"\n", i)
	}
	if pad := size - b.Len() - len("</body></html>\n") - len("<!--  -->\n"); pad > 0 {
		b.WriteString("<!-- " + strings.Repeat("x", pad) + " -->\n")
	}
	b.WriteString("</body></html>\n")
	return []byte(b.String())
}

func (t *Twins) handler(o TwinOptions, scheme string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.requests.Add(1)
		t.hitsMu.Lock()
		if k := scheme + " " + r.URL.Path; len(t.hits) < maxTwinHitPaths || t.hits[k] > 0 {
			t.hits[k]++ // bounded: a client cannot grow the table without limit
		}
		t.hitsMu.Unlock()
		switch p := r.URL.Path; {
		case p == "/" && scheme == "http" && o.UpgradeHTTP:
			http.Redirect(w, r, "https://"+o.Host+"/", http.StatusMovedPermanently)
		case p == "/" && o.Redirect:
			http.Redirect(w, r, "/index.html", http.StatusFound)
		case p == "/" || p == "/index.html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Content-Length", strconv.Itoa(len(t.page)))
			w.Write(t.page)
		case t.css != nil && strings.HasPrefix(p, "/css/"):
			if sheet, ok := t.css.stylesheet(p); ok {
				w.Header().Set("Content-Type", "text/css; charset=utf-8")
				w.Header().Set("Content-Length", strconv.Itoa(len(sheet)))
				w.Write(sheet)
				return
			}
			num, ok := strings.CutPrefix(p, "/css/img/")
			num, ok2 := strings.CutSuffix(num, ".png")
			i, err := strconv.Atoi(num)
			if !ok || !ok2 || err != nil || i < 0 || i >= o.CSSImages || TwinCSSImage(i) != p {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "image/png")
			w.Header().Set("Content-Length", strconv.Itoa(len(t.object)))
			w.Write(t.object)
		case strings.HasPrefix(p, "/obj/"):
			name := strings.TrimPrefix(p, "/obj/")
			num, ext, _ := strings.Cut(name, ".")
			i, err := strconv.Atoi(num)
			if err != nil || i < 0 || i >= o.Objects || ext != twinObjectKinds[i%len(twinObjectKinds)].ext {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", twinObjectKinds[i%len(twinObjectKinds)].ctype)
			w.Header().Set("Content-Length", strconv.Itoa(len(t.object)))
			w.Write(t.object)
		default:
			http.NotFound(w, r)
		}
	})
}

// Lookup implements probe.Lookup for the twins: Host on port 80 reaches the
// HTTP twin and on port 443 the HTTPS twin, the way DNS plus the standard
// ports would.
func (t *Twins) Lookup(_ context.Context, host string, port int) ([]netip.AddrPort, error) {
	if !strings.EqualFold(host, t.Host) {
		return nil, fmt.Errorf("testbed twins: no such host %q", host)
	}
	switch port {
	case 80:
		return []netip.AddrPort{t.HTTP}, nil
	case 443:
		return []netip.AddrPort{t.HTTPS}, nil
	}
	return nil, fmt.Errorf("testbed twins: %s serves ports 80 and 443, not %d", host, port)
}

// URL returns the page's address over scheme ("http" or "https").
func (t *Twins) URL(scheme string) string { return scheme + "://" + t.Host + "/" }

// PageBytes is the size of the HTML page.
func (t *Twins) PageBytes() int { return len(t.page) }

// ObjectBytes is the size of each sub-resource.
func (t *Twins) ObjectBytes() int { return len(t.object) }

// Conns returns how many TCP connections each twin has accepted: a client
// that reuses connections opens fewer.
func (t *Twins) Conns() (http, https int64) { return t.httpNew.Load(), t.httpsNew.Load() }

// Requests returns how many requests the twins have answered together.
func (t *Twins) Requests() int64 { return t.requests.Load() }

// maxTwinHitPaths bounds the paths Hits counts separately.
const maxTwinHitPaths = 4096

// Hits returns how many requests for each path each twin has answered:
// the keys are "http /path" and "https /path" (for at most 4096 distinct
// paths; Requests counts them all).
func (t *Twins) Hits() map[string]int64 {
	t.hitsMu.Lock()
	defer t.hitsMu.Unlock()
	m := make(map[string]int64, len(t.hits))
	for k, v := range t.hits {
		m[k] = v
	}
	return m
}

// Close stops the twins and their proxies.
func (t *Twins) Close() error {
	for _, p := range t.proxies {
		p.Close()
	}
	for _, s := range t.servers {
		s.Close()
	}
	return nil
}
