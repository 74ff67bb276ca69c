package obcbench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/obc"
	"github.com/pkie/pkie/obc/server"
)

// The paper's Figures 6 and 7 (Origin-Bound Certificates, USENIX Security
// 2012, §6.1.1): Chromium's fetchStart-to-responseEnd latency of Google's
// home page, ms. The text layer runs the bar labels together: Figure 6
// (first visit, certificate generated) reads "1052514401011", which we
// split as 105 (no TLS-OBC), 251 (ECDSA), 440 (RSA-1024), 1011 (RSA-2048),
// the one split in bar order that stays under the figure's 1,400 ms axis
// and rises with the key size; Figure 7 (return visit) reads
// "105104108117": 105, 104, 108, 117.
var (
	paperBaselineMs = 105.0
	paperFirstMs    = map[string]float64{"ecdsa-p256": 251, "rsa-1024": 440, "rsa-2048": 1011}
	paperReturnMs   = map[string]float64{"ecdsa-p256": 104, "rsa-1024": 108, "rsa-2048": 117}
)

// FetchRow is the page fetch experiment (Figures 6–7): one HTTPS page
// through a delay proxy, each fetch on a new connection with no TLS session
// to resume (the paper reset connections and state between runs).
type FetchRow struct {
	RTTms     float64 `json:"rtt_ms"`
	PageBytes int     `json:"page_bytes"`
	Samples   int     `json:"samples"`
	// BaselineMs is a fetch from a server that asks for no client
	// certificate, by a client without one.
	BaselineMs      Stats       `json:"baseline_ms"`
	PaperBaselineMs float64     `json:"paper_baseline_ms"`
	Cases           []FetchCase `json:"cases"`
}

// FetchCase is one client key algorithm's fetches from a TLS-OBC server.
type FetchCase struct {
	Alg string `json:"alg"`
	// FirstMs is a first visit (a new origin each: the store makes its
	// key and certificate), FirstPooledMs the same with a full key pool,
	// ReturnMs a later visit (the stored certificate, a new connection).
	FirstMs       Stats `json:"first_ms"`
	FirstPooledMs Stats `json:"first_pooled_ms"`
	ReturnMs      Stats `json:"return_ms"`
	// Presented counts the fetches whose server saw a client
	// certificate of Alg (every one, or the run fails).
	Presented     int     `json:"presented"`
	PaperFirstMs  float64 `json:"paper_first_ms,omitempty"`
	PaperReturnMs float64 `json:"paper_return_ms,omitempty"`
}

// fetchSite is a page served with and without client certificates, each
// behind a delay proxy.
type fetchSite struct {
	ca             *testbed.CA
	plain, obc     *http.Server
	plainPx, obcPx *testbed.DelayProxy
	plainLn, obcLn net.Listener
	page           []byte
}

func startFetchSite(cfg *Config) (*fetchSite, error) {
	ca, err := testbed.NewRootCA("obcbench CA", testbed.ECDSAP256)
	if err != nil {
		return nil, err
	}
	leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"*.obc.test", "www.obc.test"}})
	if err != nil {
		return nil, err
	}
	s := &fetchSite{ca: ca, page: make([]byte, cfg.PageBytes)}
	for i := range s.page {
		s.page[i] = byte('a' + i%26)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What the server saw, for the client to check.
		w.Header().Set("Obcbench-Client-Key", KeyLabel(r.TLS))
		if id, ok := server.Identity(r); ok {
			w.Header().Set("Obcbench-Identity", fmt.Sprintf("%x", id[:]))
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(s.page)))
		w.Write(s.page)
	})
	base := &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}}
	start := func(tc *tls.Config) (*http.Server, net.Listener, *testbed.DelayProxy, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, nil, err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nullLogger()}
		go srv.Serve(tls.NewListener(ln, tc))
		px, err := testbed.StartDelayProxy(ln.Addr().String(), cfg.RTT)
		if err != nil {
			srv.Close()
			return nil, nil, nil, err
		}
		return srv, ln, px, nil
	}
	if s.plain, s.plainLn, s.plainPx, err = start(base); err != nil {
		return nil, err
	}
	if s.obc, s.obcLn, s.obcPx, err = start(server.TLSConfig(base)); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *fetchSite) close() {
	for _, px := range []*testbed.DelayProxy{s.plainPx, s.obcPx} {
		if px != nil {
			px.Close()
		}
	}
	for _, srv := range []*http.Server{s.plain, s.obc} {
		if srv != nil {
			srv.Close()
		}
	}
}

// transport returns a fresh transport (no session to resume, no idle
// connection) dialling every name through px.
func (s *fetchSite) transport(px *testbed.DelayProxy) *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second}
	return &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: s.ca.Pool()},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, px.Addr.String())
		},
	}
}

// fetch gets u and returns the time from the request's start to the
// body's last byte, and the client key the server saw.
func (s *fetchSite) fetch(ctx context.Context, rt http.RoundTripper, u string) (float64, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	t0 := time.Now()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, "", fmt.Errorf("obcbench: fetching %s: %w", u, err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err == nil && (resp.StatusCode != http.StatusOK || n != int64(len(s.page))) {
		err = fmt.Errorf("status %d, %d of %d bytes", resp.StatusCode, n, len(s.page))
	}
	if err != nil {
		return 0, "", fmt.Errorf("obcbench: fetching %s: %w", u, err)
	}
	return ms(d), resp.Header.Get("Obcbench-Client-Key"), nil
}

func runFetch(ctx context.Context, cfg *Config) (*FetchRow, error) {
	s, err := startFetchSite(cfg)
	if err != nil {
		return nil, err
	}
	defer s.close()
	dir, err := os.MkdirTemp("", "pkie-obcbench-")
	if err != nil {
		return nil, fmt.Errorf("obcbench: %w", err)
	}
	defer os.RemoveAll(dir)
	row := &FetchRow{RTTms: ms(cfg.RTT), PageBytes: cfg.PageBytes, Samples: cfg.FetchSamples, PaperBaselineMs: paperBaselineMs}
	n := cfg.FetchSamples
	cfg.logf("fetch: %d fetches without client certificates through a %v delay proxy", n, cfg.RTT)
	var base []float64
	for range n {
		d, key, err := s.fetch(ctx, s.transport(s.plainPx), "https://www.obc.test/")
		if err != nil {
			return nil, err
		}
		if key != "none" {
			return nil, fmt.Errorf("obcbench: the plain server saw a %s client key", key)
		}
		base = append(base, d)
	}
	row.BaselineMs = summarize(base)
	for _, a := range cfg.Algs {
		alg, err := obc.ParseAlg(a)
		if err != nil {
			return nil, err
		}
		c := FetchCase{Alg: a, PaperFirstMs: paperFirstMs[a], PaperReturnMs: paperReturnMs[a]}
		// visits fetches n origins (prefix0 … prefixN-1) with st, each
		// through a new Transport: no connection or TLS session outlives
		// a fetch, only the store's certificates do.
		visits := func(st *obc.Store, prefix string) ([]float64, error) {
			var out []float64
			for i := range n {
				rt := obc.Transport(s.transport(s.obcPx), st)
				d, key, err := s.fetch(ctx, rt, fmt.Sprintf("https://%s%d.obc.test/", prefix, i))
				if err != nil {
					return nil, err
				}
				if key != a {
					return nil, fmt.Errorf("obcbench: the server saw a %s client key, want %s", key, a)
				}
				c.Presented++
				out = append(out, d)
			}
			return out, nil
		}
		cfg.logf("fetch: %s, %d first visits, %d return visits, %d first visits with a key pool", a, n, n, n)
		st, err := obc.Open(ctx, filepath.Join(dir, a+".db"), obc.StoreOptions{Alg: alg})
		if err != nil {
			return nil, err
		}
		first, err := visits(st, "f")
		var back []float64
		if err == nil {
			back, err = visits(st, "f")
		}
		st.Close()
		if err != nil {
			return nil, err
		}
		st, err = obc.Open(ctx, filepath.Join(dir, a+"-pool.db"), obc.StoreOptions{Alg: alg, PoolSize: n})
		if err != nil {
			return nil, err
		}
		var pooled []float64
		if err = st.WaitPool(ctx); err == nil {
			pooled, err = visits(st, "p")
		}
		st.Close()
		if err != nil {
			return nil, err
		}
		c.FirstMs, c.ReturnMs, c.FirstPooledMs = summarize(first), summarize(back), summarize(pooled)
		row.Cases = append(row.Cases, c)
	}
	return row, nil
}
