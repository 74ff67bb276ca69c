package overhead

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
)

func startTwins(t *testing.T, o testbed.TwinOptions) *testbed.Twins {
	t.Helper()
	tw, err := testbed.StartTwins(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tw.Close() })
	return tw
}

func twinMeter(tw *testbed.Twins, o Options) *Meter {
	o.AllowPrivate = true
	o.Lookup = tw.Lookup
	o.RootCAs = tw.CA.Pool()
	if o.PageTimeout == 0 {
		o.PageTimeout = 10 * time.Second
	}
	return New(o)
}

func mustSite(t *testing.T, raw string) Site {
	t.Helper()
	s, err := ParseSite(raw)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOverheadMatchesRTT places HTTP and HTTPS twins behind delay proxies at
// a configured RTT and checks that the non-persistent overhead per object is
// the handshake's round trips: one for TLS 1.3, two for TLS 1.2, as pkie
// measures it and as curl (time_appconnect − time_connect) does.
//
// Tolerance. The proxy delivers every chunk no earlier than RTT/2 after it
// read it (it sleeps until then) and does not delay the TCP connect, so a
// handshake through it costs k·RTT plus the handshake's computation (about
// 1 ms, a few under the race detector) plus timer lateness and scheduling
// delays, which on a loaded 2-core CI machine (load average 15 observed)
// reach 10–20 ms on single requests. Noise only ever adds, so the test
// compares floors: the fastest handshake, the fastest page load per scheme.
// A handshake floor must lie in [k·RTT, k·RTT + RTT/2) and the per-object
// download-time difference within RTT/2 of k·RTT (the HTTP side's own noise
// can subtract): the windows of one and two round trips do not overlap, so
// TLS 1.2 measured as one round trip, or TLS 1.3 as two, fails. pkie's and
// curl's floors must agree within RTT/4. A measurement is repeated (up to
// three times) only when it falls outside the windows, which noise can
// cause once but a wrong measurement causes every time.
func TestOverheadMatchesRTT(t *testing.T) {
	const rtt = 40 * time.Millisecond
	for _, tc := range []struct {
		version uint16
		trips   int
	}{
		{tls.VersionTLS13, 1},
		{tls.VersionTLS12, 2},
	} {
		t.Run(tls.VersionName(tc.version), func(t *testing.T) {
			tw := startTwins(t, testbed.TwinOptions{Objects: 3, RTT: rtt, TLSVersion: tc.version})
			var problems []string
			for attempt := 1; attempt <= 3; attempt++ {
				problems = rttAttempt(t, tw, rtt, tc.trips)
				if len(problems) == 0 {
					return
				}
				t.Logf("attempt %d: %s", attempt, strings.Join(problems, "; "))
			}
			t.Error(strings.Join(problems, "\n"))
		})
	}
}

// rttAttempt measures the twins once and returns what is out of bounds.
// Structural errors (wrong counts, wrong TLS version) fail at once.
func rttAttempt(t *testing.T, tw *testbed.Twins, rtt time.Duration, trips int) (problems []string) {
	t.Helper()
	m := twinMeter(tw, Options{Runs: 5, Modes: []Mode{NonPersistent}, KeepObjects: true})
	rep := m.Measure(context.Background(), []Site{mustSite(t, tw.Host)})
	if len(rep.Unresponsive) > 0 {
		t.Fatalf("unresponsive: %+v", rep.Unresponsive)
	}
	sa := rep.Aggregates.Sites[0]
	if sa.Requests != 4 || sa.Handshakes != 4 || sa.Conns != 4 {
		t.Fatalf("requests %v, handshakes %v, conns %v per load; want 4 each (page + 3 objects, each on its own connection)", sa.Requests, sa.Handshakes, sa.Conns)
	}
	r := msOf(rtt)
	want := float64(trips) * r
	minTLS, minConnect := 1e9, 1e9
	for _, l := range rep.Sites[0].Loads {
		for _, o := range l.Objects {
			if l.Scheme == "https" {
				if o.TLSVersion != tls.VersionName(tw.TLSVersion) {
					t.Fatalf("object %s negotiated %q, want %s", o.URL, o.TLSVersion, tls.VersionName(tw.TLSVersion))
				}
				minTLS = min(minTLS, msOf(o.Phases.TLS))
			} else if o.Phases.TLS != 0 || o.Handshake {
				t.Fatalf("HTTP object %s has a TLS phase", o.URL)
			}
			minConnect = min(minConnect, msOf(o.Phases.Connect))
		}
	}
	floor := (sa.HTTPSMS.Min - sa.HTTPMS.Min) / sa.Requests
	curlMS := curlHandshakeMS(t, tw, 5)
	t.Logf("%s at RTT %v: fastest handshake pkie %.1f ms, curl %.1f ms; per-object overhead floor %.1f ms, median %.1f ms; fastest connect %.1f ms; want %.0f ms",
		tls.VersionName(tw.TLSVersion), rtt, minTLS, curlMS, floor, sa.OverheadMS.Median/sa.Requests, minConnect, want)
	if minTLS < want || minTLS >= want+r/2 {
		problems = append(problems, fmt.Sprintf("pkie's fastest TLS handshake %.1f ms, want %.0f–%.0f ms", minTLS, want, want+r/2))
	}
	if floor <= want-r/2 || floor >= want+r/2 {
		problems = append(problems, fmt.Sprintf("per-object overhead floor %.1f ms, want %.0f ± %.0f ms", floor, want, r/2))
	}
	if curlMS < want || curlMS >= want+r/2 {
		problems = append(problems, fmt.Sprintf("curl's fastest handshake %.1f ms, want %.0f–%.0f ms", curlMS, want, want+r/2))
	}
	if d := minTLS - curlMS; d < -r/4 || d > r/4 {
		problems = append(problems, fmt.Sprintf("pkie's fastest handshake %.1f ms and curl's %.1f ms differ by more than %.0f ms", minTLS, curlMS, r/4))
	}
	if minConnect >= r/2 {
		problems = append(problems, fmt.Sprintf("fastest connect %.1f ms: the delay proxy does not delay connects", minConnect))
	}
	return problems
}

// curlHandshakeMS runs curl against the HTTPS twin n times and returns the
// smallest time_appconnect − time_connect in ms.
func curlHandshakeMS(t *testing.T, tw *testbed.Twins, n int) float64 {
	t.Helper()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl is needed to cross-check the measurement (apt-get install curl): %v", err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, tw.CA.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	ver := "1.3"
	if tw.TLSVersion == tls.VersionTLS12 {
		ver = "1.2"
	}
	var got []float64
	for i := 0; i < n; i++ {
		cmd := exec.Command(curl, "--silent", "--show-error", "--http1.1", "--noproxy", "*",
			"--tlsv"+ver, "--tls-max", ver, "--cacert", ca,
			"--connect-to", fmt.Sprintf("%s:443:%s:%d", tw.Host, tw.HTTPS.Addr(), tw.HTTPS.Port()),
			"-o", os.DevNull, "-w", "%{time_connect} %{time_appconnect}", tw.URL("https"))
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("curl: %v: %s", err, stderr.String())
		}
		f := strings.Fields(out.String())
		if len(f) != 2 {
			t.Fatalf("curl printed %q", out.String())
		}
		c, err1 := strconv.ParseFloat(f[0], 64)
		a, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil || a <= c {
			t.Fatalf("curl printed %q", out.String())
		}
		got = append(got, (a-c)*1000)
	}
	sort.Float64s(got)
	return got[0]
}

// TestPersistentHandshakeOnce checks the two modes' connection use, on the
// client's counts and on the servers' own: persistent pays one connection
// and one TLS handshake per page load, non-persistent one per object.
func TestPersistentHandshakeOnce(t *testing.T) {
	const objects, runs = 5, 3
	for _, mode := range []Mode{Persistent, NonPersistent} {
		t.Run(string(mode), func(t *testing.T) {
			tw := startTwins(t, testbed.TwinOptions{Objects: objects})
			m := twinMeter(tw, Options{Runs: runs, Modes: []Mode{mode}, KeepObjects: true})
			rep := m.Measure(context.Background(), []Site{mustSite(t, tw.URL("https"))})
			if len(rep.Unresponsive) > 0 {
				t.Fatalf("unresponsive: %+v", rep.Unresponsive)
			}
			perLoad := 1
			if mode == NonPersistent {
				perLoad = objects + 1
			}
			for _, l := range rep.Sites[0].Loads {
				wantHS := perLoad
				if l.Scheme == "http" {
					wantHS = 0
				}
				if l.Requests != objects+1 || l.Conns != perLoad || l.Handshakes != wantHS || l.Failed != 0 {
					t.Errorf("%s load %d: %d requests, %d conns, %d handshakes, %d failed; want %d, %d, %d, 0",
						l.Scheme, l.Run, l.Requests, l.Conns, l.Handshakes, l.Failed, objects+1, perLoad, wantHS)
				}
				wantBytes := int64(tw.PageBytes() + objects*tw.ObjectBytes())
				if l.Bytes != wantBytes {
					t.Errorf("%s load %d: %d bytes, want %d", l.Scheme, l.Run, l.Bytes, wantBytes)
				}
				reused := 0
				for _, o := range l.Objects {
					if o.Reused {
						reused++
					}
					if o.Status != http.StatusOK {
						t.Errorf("%s: status %d", o.URL, o.Status)
					}
					// Every phase is traced: the lookup (through the
					// override) and connect on new connections, TLS on new
					// HTTPS ones, first byte and total always.
					p := o.Phases
					fresh := !o.Reused
					if (p.DNS > 0) != fresh || (p.Connect > 0) != fresh || (p.TLS > 0) != (fresh && l.Scheme == "https") || p.FirstByte <= 0 || p.Total < p.FirstByte+p.Transfer {
						t.Errorf("%s load %d, %s (reused %v): phases %+v", l.Scheme, l.Run, o.URL, o.Reused, p)
					}
				}
				if want := objects + 1 - perLoad; reused != want {
					t.Errorf("%s load %d: %d requests on reused connections, want %d", l.Scheme, l.Run, reused, want)
				}
			}
			httpConns, httpsConns := tw.Conns()
			if httpConns != int64(runs*perLoad) || httpsConns != int64(runs*perLoad) {
				t.Errorf("servers accepted %d HTTP and %d HTTPS connections, want %d each", httpConns, httpsConns, runs*perLoad)
			}
		})
	}
}

func TestRedirects(t *testing.T) {
	t.Run("same scheme", func(t *testing.T) {
		tw := startTwins(t, testbed.TwinOptions{Objects: 2, Redirect: true})
		m := twinMeter(tw, Options{Runs: 2, Modes: []Mode{Persistent}})
		rep := m.Measure(context.Background(), []Site{mustSite(t, tw.Host)})
		if len(rep.Unresponsive) > 0 {
			t.Fatalf("unresponsive: %+v", rep.Unresponsive)
		}
		for _, l := range rep.Sites[0].Loads {
			if len(l.Redirects) != 1 || l.Redirects[0] != l.URL || l.FinalURL != l.Scheme+"://twin.test/index.html" || l.Requests != 4 {
				t.Errorf("%s load: redirects %q, final %q, %d requests; want [%s], %s://twin.test/index.html, 4", l.Scheme, l.Redirects, l.FinalURL, l.Requests, l.URL, l.Scheme)
			}
		}
		ma := rep.Aggregates.Modes[0]
		if !rep.Aggregates.Sites[0].Redirected || ma.All.Sites != 1 || ma.WithoutRedirects.Sites != 0 {
			t.Errorf("redirected %v, sites %d with redirects and %d without; want true, 1, 0", rep.Aggregates.Sites[0].Redirected, ma.All.Sites, ma.WithoutRedirects.Sites)
		}
	})
	t.Run("upgrade to https", func(t *testing.T) {
		tw := startTwins(t, testbed.TwinOptions{Objects: 1, UpgradeHTTP: true})
		m := twinMeter(tw, Options{Runs: 1, Modes: []Mode{NonPersistent}})
		rep := m.Measure(context.Background(), []Site{mustSite(t, tw.Host)})
		for _, l := range rep.Sites[0].Loads {
			if l.Scheme != "http" {
				continue
			}
			// The HTTP load is redirected to HTTPS and so pays TLS for the
			// page and its object, as the thesis observed for facebook.com.
			if !l.OK() || len(l.Redirects) != 1 || l.FinalURL != "https://twin.test/" || l.Handshakes != 2 {
				t.Errorf("http load: ok %v (%s), redirects %q, final %q, handshakes %d; want ok, 1 redirect, https://twin.test/, 2",
					l.OK(), l.Err, l.Redirects, l.FinalURL, l.Handshakes)
			}
		}
	})
	t.Run("loop", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/again", http.StatusFound)
		}))
		defer srv.Close()
		m := New(Options{Runs: 1, Modes: []Mode{Persistent}, AllowPrivate: true, MaxRedirects: 3, Lookup: fixedLookup(srv.URL)})
		u, _ := url.Parse("http://loop.test/")
		l := m.LoadPage(context.Background(), u, Persistent)
		if l.OK() || !strings.Contains(l.Err, "more than 3 redirects") || l.Requests != 4 {
			t.Errorf("redirect loop: err %q after %d requests; want \"more than 3 redirects\" after 4", l.Err, l.Requests)
		}
	})
}

// fixedLookup resolves every name to the server at rawURL.
func fixedLookup(rawURL string) func(context.Context, string, int) ([]netip.AddrPort, error) {
	u, _ := url.Parse(rawURL)
	ap := netip.MustParseAddrPort(u.Host)
	return func(context.Context, string, int) ([]netip.AddrPort, error) { return []netip.AddrPort{ap}, nil }
}

func TestUnresponsive(t *testing.T) {
	tw := startTwins(t, testbed.TwinOptions{Objects: 1})
	closed := startTwins(t, testbed.TwinOptions{Host: "down.test"})
	closed.Close()
	lookup := func(ctx context.Context, host string, port int) ([]netip.AddrPort, error) {
		if host == "down.test" {
			return closed.Lookup(ctx, host, port)
		}
		if host == "nohttps.test" {
			if port == 443 {
				return []netip.AddrPort{closed.HTTPS}, nil
			}
			return tw.Lookup(ctx, tw.Host, port)
		}
		return tw.Lookup(ctx, host, port)
	}
	sites := []Site{
		mustSite(t, "twin.test"),
		mustSite(t, "twin.test/missing"),
		mustSite(t, "down.test"),
		mustSite(t, "nohttps.test"),
		mustSite(t, "nxdomain.test"),
	}
	var progress bytes.Buffer
	m := New(Options{Runs: 2, Modes: []Mode{NonPersistent, Persistent}, AllowPrivate: true, Lookup: lookup, RootCAs: tw.CA.Pool(), PageTimeout: 5 * time.Second, Progress: &progress})
	rep := m.Measure(context.Background(), sites)
	// 1 responsive site × 2 modes × 2 runs × 2 schemes, plus one pair
	// for each of the 4 sites given up after their first run.
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "overhead: 16/16 page loads (100%), 4 unresponsive") {
		t.Errorf("last progress line %q, want 16/16 loads and 4 unresponsive", last)
	}
	got := map[string][]string{}
	for _, u := range rep.Unresponsive {
		got[u.Site] = append(got[u.Site], u.Scheme+": "+u.Reason)
	}
	want := map[string][]string{
		"twin.test/missing": {"http: page answered HTTP status 404", "https: page answered HTTP status 404"},
		"down.test/":        {"http: cannot connect", "https: cannot connect"},
		"nohttps.test/":     {"https: cannot connect"},
		"nxdomain.test/":    {"http: cannot resolve host", "https: cannot resolve host"},
	}
	if len(got) != len(want) {
		t.Errorf("unresponsive sites %q, want %d of them", got, len(want))
	}
	for site, reasons := range want {
		g := got[site]
		if len(g) != len(reasons) {
			t.Errorf("%s: reasons %q, want %q", site, g, reasons)
			continue
		}
		sort.Strings(g)
		for i := range reasons {
			if !strings.HasPrefix(g[i], reasons[i]) {
				t.Errorf("%s: reason %q, want it to start %q", site, g[i], reasons[i])
			}
		}
	}
	// An unresponsive site is given up after its first run, in every mode.
	for _, s := range rep.Sites {
		if s.Site != "twin.test/" && len(s.Loads) != 2 {
			t.Errorf("%s: %d loads, want 2 (one run, then given up)", s.Site, len(s.Loads))
		}
	}
	if ag := rep.Aggregates.Modes; len(ag) != 2 || ag[0].All.Sites != 1 || ag[1].All.Sites != 1 {
		t.Errorf("aggregates cover %+v; want the one responsive site in each mode", ag)
	}
}

func TestPrivateAddressRefused(t *testing.T) {
	tw := startTwins(t, testbed.TwinOptions{})
	m := New(Options{Runs: 1, Modes: []Mode{Persistent}, Lookup: tw.Lookup, RootCAs: tw.CA.Pool()})
	rep := m.Measure(context.Background(), []Site{mustSite(t, tw.Host)})
	if len(rep.Unresponsive) != 2 {
		t.Fatalf("unresponsive %+v, want both schemes refused", rep.Unresponsive)
	}
	for _, u := range rep.Unresponsive {
		if !strings.Contains(u.Reason, "refusing to connect to 127.0.0.1 (Loopback)") {
			t.Errorf("%s: reason %q does not say loopback was refused", u.Scheme, u.Reason)
		}
	}
	if n := tw.Requests(); n != 0 {
		t.Errorf("twins answered %d requests despite the refusal", n)
	}
}

func TestLimits(t *testing.T) {
	tw := startTwins(t, testbed.TwinOptions{Objects: 3, ObjectSize: 4096})
	u, _ := url.Parse(tw.URL("https"))
	t.Run("object too big", func(t *testing.T) {
		m := twinMeter(tw, Options{MaxObjectBytes: 4095, KeepObjects: true})
		l := m.LoadPage(context.Background(), u, Persistent)
		if !l.OK() || l.Failed != 3 {
			t.Fatalf("load ok %v (%s) with %d failed objects; want ok with 3 failed", l.OK(), l.Err, l.Failed)
		}
		if e := l.Objects[1].Err; !strings.Contains(e, "exceeds the 4095-byte object limit") {
			t.Errorf("object error %q", e)
		}
	})
	t.Run("page budget", func(t *testing.T) {
		m := twinMeter(tw, Options{MaxPageBytes: int64(tw.PageBytes() + 4096)})
		l := m.LoadPage(context.Background(), u, Persistent)
		if l.OK() || !strings.Contains(l.Err, "page limit") {
			t.Errorf("load err %q, want the page limit", l.Err)
		}
	})
	t.Run("max objects", func(t *testing.T) {
		m := twinMeter(tw, Options{MaxObjects: 2})
		if l := m.LoadPage(context.Background(), u, Persistent); l.Requests != 3 {
			t.Errorf("%d requests, want page + 2", l.Requests)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		slow := startTwins(t, testbed.TwinOptions{Objects: 2, RTT: 100 * time.Millisecond})
		m := twinMeter(slow, Options{PageTimeout: 150 * time.Millisecond})
		l := m.LoadPage(context.Background(), u, NonPersistent)
		if l.OK() || !strings.Contains(l.Err, "timed out") && !strings.Contains(l.Err, "page timeout") {
			t.Errorf("load err %q, want a timeout", l.Err)
		}
	})
}

func TestGzipPage(t *testing.T) {
	page := `<html><img src="/a.png"><script src="/b.js"></script></html>`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			w.Write([]byte("x"))
			return
		}
		if r.Header.Get("Accept-Encoding") != "gzip" {
			t.Errorf("Accept-Encoding %q", r.Header.Get("Accept-Encoding"))
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write([]byte(page))
		zw.Close()
	}))
	defer srv.Close()
	m := New(Options{AllowPrivate: true, Lookup: fixedLookup(srv.URL)})
	u, _ := url.Parse("http://gz.test/")
	l := m.LoadPage(context.Background(), u, Persistent)
	if !l.OK() || l.Requests != 3 {
		t.Errorf("gzip page: ok %v (%s), %d requests; want the page's 2 objects fetched", l.OK(), l.Err, l.Requests)
	}
}

func TestParseSite(t *testing.T) {
	tests := []struct {
		in, name, http, https, err string
	}{
		{in: "example.com", name: "example.com/", http: "http://example.com/", https: "https://example.com/"},
		{in: "HTTPS://Example.COM/News?q=1#frag", name: "example.com/News?q=1", http: "http://example.com/News?q=1", https: "https://example.com/News?q=1"},
		{in: "http://192.0.2.1/", name: "192.0.2.1/", http: "http://192.0.2.1/", https: "https://192.0.2.1/"},
		{in: "http://[2001:db8::1]/", name: "[2001:db8::1]/", http: "http://[2001:db8::1]/", https: "https://[2001:db8::1]/"},
		{in: "", err: "empty URL"},
		{in: "ftp://example.com/", err: `scheme "ftp" is not http or https`},
		{in: "http://", err: "has no host"},
		{in: "http://example.com:8080/", err: "names port 8080"},
		{in: "http://user:pw@example.com/", err: "user credentials"},
		{in: "http://exa mple.com/", err: "malformed URL"},
		{in: "http://%zz/", err: "malformed URL"},
		{in: "http://" + strings.Repeat("a", 254) + "/", err: "at most 253"},
	}
	for _, tc := range tests {
		s, err := ParseSite(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSite(%q) = %v, want error containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSite(%q): %v", tc.in, err)
			continue
		}
		if s.Name != tc.name || s.HTTP.String() != tc.http || s.HTTPS.String() != tc.https {
			t.Errorf("ParseSite(%q) = %q %s %s, want %q %s %s", tc.in, s.Name, s.HTTP, s.HTTPS, tc.name, tc.http, tc.https)
		}
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		in   []float64
		want Summary
	}{
		{nil, Summary{}},
		{[]float64{5}, Summary{N: 1, Mean: 5, Median: 5, P75: 5, P90: 5, Min: 5, Max: 5}},
		{[]float64{4, 1, 3, 2}, Summary{N: 4, Mean: 2.5, Median: 2.5, P75: 3.25, P90: 3.7, Min: 1, Max: 4}},
		{[]float64{-10, 0, 10, 20, 30, 40, 50, 60, 70, 80, 90}, Summary{N: 11, Mean: 40, Median: 40, P75: 65, P90: 80, Min: -10, Max: 90}},
	}
	for _, tc := range tests {
		got := Summarize(tc.in)
		near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
		if got.N != tc.want.N || !near(got.Mean, tc.want.Mean) || !near(got.Median, tc.want.Median) || !near(got.P75, tc.want.P75) ||
			!near(got.P90, tc.want.P90) || got.Min != tc.want.Min || got.Max != tc.want.Max {
			t.Errorf("Summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestAggregate checks the arithmetic on hand-made loads: the thesis's
// overhead is mean(HTTPS) − mean(HTTP) per site, its percentage relative to
// HTTP, and failed runs are left out.
func TestAggregate(t *testing.T) {
	ld := func(scheme string, run int, ms int, err string, redirects ...string) Load {
		return Load{Scheme: scheme, Mode: Persistent, Run: run, Duration: time.Duration(ms) * time.Millisecond, Err: err, Requests: 2, Redirects: redirects}
	}
	sites := []SiteResult{
		{Site: "a", Loads: []Load{ld("http", 0, 100, ""), ld("https", 0, 150, ""), ld("http", 1, 300, ""), ld("https", 1, 330, ""), ld("http", 2, 1, "boom"), ld("https", 2, 1, "")}},
		{Site: "b", Loads: []Load{ld("http", 0, 1000, "", "x"), ld("https", 0, 1100, "")}},
	}
	ag := Aggregate(sites, []Mode{Persistent, NonPersistent})
	if len(ag.Sites) != 2 || len(ag.Modes) != 2 {
		t.Fatalf("got %d site and %d mode aggregates", len(ag.Sites), len(ag.Modes))
	}
	a := ag.Sites[0]
	if a.Pairs != 2 || a.Failed != 1 || a.MeanOverheadMS != 40 || a.MeanOverheadPct != 20 || a.OverheadMS.Median != 40 || a.OverheadPct.Mean != 30 || a.OverheadPerRequestMS != 20 {
		t.Errorf("site a: %+v", a)
	}
	all, nr := ag.Modes[0].All, ag.Modes[0].WithoutRedirects
	if all.Sites != 2 || all.HTTPMeanMS != 600 || all.HTTPSMeanMS != 670 || all.OverheadMS != 70 || all.SiteOverheadMS.Median != 70 {
		t.Errorf("all: %+v", all)
	}
	if nr.Sites != 1 || nr.OverheadMS != 40 || nr.RunOverheadMS.N != 2 {
		t.Errorf("without redirects: %+v", nr)
	}
	if ag.Modes[1].All.Sites != 0 {
		t.Errorf("non-persistent has no loads but %d sites", ag.Modes[1].All.Sites)
	}
}

// TestParallel fetches sub-resources several at a time: a persistent load
// then opens more than one connection but never more than Parallel.
func TestParallel(t *testing.T) {
	tw := startTwins(t, testbed.TwinOptions{Objects: 9, RTT: 10 * time.Millisecond})
	m := twinMeter(tw, Options{Parallel: 3, KeepObjects: true})
	u, _ := url.Parse(tw.URL("https"))
	for _, mode := range []Mode{Persistent, NonPersistent} {
		l := m.LoadPage(context.Background(), u, mode)
		if !l.OK() || l.Requests != 10 || l.Failed != 0 {
			t.Fatalf("%s: ok %v (%s), %d requests, %d failed", mode, l.OK(), l.Err, l.Requests, l.Failed)
		}
		// The page comes first on its own connection, which one object
		// reuses; at most 3 connections to the host at once.
		lo, hi := 2, 3
		if mode == NonPersistent {
			lo, hi = 10, 10
		}
		if l.Conns < lo || l.Conns > hi || l.Handshakes != l.Conns {
			t.Errorf("%s: %d conns, %d handshakes; want %d–%d conns, one handshake each", mode, l.Conns, l.Handshakes, lo, hi)
		}
	}
}

// TestMeasureInterrupted ends the context mid-measurement: Measure returns
// promptly with what it has and says why the rest was not measured.
func TestMeasureInterrupted(t *testing.T) {
	tw := startTwins(t, testbed.TwinOptions{Objects: 1, RTT: 20 * time.Millisecond})
	m := twinMeter(tw, Options{Runs: 1000, Modes: []Mode{Persistent}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	rep := m.Measure(ctx, []Site{mustSite(t, tw.Host), mustSite(t, tw.Host+"/second")})
	if len(rep.Unresponsive) != 2 ||
		!strings.Contains(rep.Unresponsive[0].Reason, "interrupted after") ||
		!strings.Contains(rep.Unresponsive[1].Reason, "not measured: context canceled") {
		t.Errorf("unresponsive %+v; want the first site interrupted and the second not measured", rep.Unresponsive)
	}
	if n := len(rep.Sites[0].Loads); n == 0 || n >= 2000 {
		t.Errorf("%d loads before the interruption", n)
	}
}
