package overhead

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
)

const (
	benchObjects   = 10
	benchCSSImages = 8
)

// benchPages are the pages the tool's own cost is measured on: the plain
// twins (page + 10 objects of 1 KiB), and the same with CSS (two more
// stylesheets, one @import'ed, and 8 background images of 1 KiB).
var benchPages = []struct {
	name      string
	cssImages int
}{{"plain", 0}, {"css", benchCSSImages}}

// BenchmarkPageLoad is the tool's own cost: whole-page loads per second on
// loopback with no added delay, with httptrace, HTML and CSS parsing and
// bookkeeping. Compare with BenchmarkBareFetch, the ceiling: the same
// requests from a bare net/http client in the same run.
func BenchmarkPageLoad(b *testing.B) {
	for _, page := range benchPages {
		tw := benchTwinsCSS(b, 0, tls.VersionTLS13, page.cssImages)
		for _, mode := range []Mode{NonPersistent, Persistent} {
			for _, scheme := range []string{"http", "https"} {
				b.Run(fmt.Sprintf("%s/%s/%s", page.name, mode, scheme), func(b *testing.B) {
					m := twinMeter(tw, Options{})
					u, _ := url.Parse(tw.URL(scheme))
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if l := m.LoadPage(context.Background(), u, mode); !l.OK() || l.Requests != tw.LoadRequests() {
							b.Fatalf("load: %s, %d requests", l.Err, l.Requests)
						}
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "loads/s")
				})
			}
		}
	}
}

// BenchmarkBareFetch is BenchmarkPageLoad's ceiling: a plain net/http
// client fetching the same page and objects (URLs known in advance, no
// tracing, no parsing), with a fresh Transport per page load as the tool
// uses.
func BenchmarkBareFetch(b *testing.B) {
	for _, page := range benchPages {
		tw := benchTwinsCSS(b, 0, tls.VersionTLS13, page.cssImages)
		for _, mode := range []Mode{NonPersistent, Persistent} {
			for _, scheme := range []string{"http", "https"} {
				b.Run(fmt.Sprintf("%s/%s/%s", page.name, mode, scheme), func(b *testing.B) {
					benchBareFetch(b, tw, mode, scheme)
				})
			}
		}
	}
}

func benchBareFetch(b *testing.B, tw *testbed.Twins, mode Mode, scheme string) {
	addr := tw.HTTP.String()
	if scheme == "https" {
		addr = tw.HTTPS.String()
	}
	urls := []string{tw.URL(scheme)}
	for i := 0; i < benchObjects; i++ {
		ext := []string{"png", "js", "css"}[i%3]
		urls = append(urls, fmt.Sprintf("%s://%s/obj/%d.%s", scheme, tw.Host, i, ext))
	}
	if tw.CSSImages > 0 {
		urls = append(urls, scheme+"://"+tw.Host+testbed.TwinMainCSS, scheme+"://"+tw.Host+testbed.TwinImportedCSS)
		for i := 0; i < tw.CSSImages; i++ {
			urls = append(urls, scheme+"://"+tw.Host+testbed.TwinCSSImage(i))
		}
	}
	if len(urls) != tw.LoadRequests() {
		b.Fatalf("%d URLs for a %d-request page", len(urls), tw.LoadRequests())
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr := &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
			TLSClientConfig:   &tls.Config{RootCAs: tw.CA.Pool()},
			DisableKeepAlives: mode == NonPersistent,
		}
		c := &http.Client{Transport: tr}
		for _, u := range urls {
			resp, err := c.Get(u)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		tr.CloseIdleConnections()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "loads/s")
}

// BenchmarkOverheadRTT measures the HTTPS overhead of a page with 10
// objects placed at a configured RTT, in both modes and both TLS versions,
// fetching objects one at a time or six at a time (as a browser does).
// Each iteration is one HTTP and one HTTPS load. Reported: the overhead per
// page in ms and in % of the HTTP time, and per request in ms and in RTTs
// (expected: 1 per request for TLS 1.3 and 2 for TLS 1.2 non-persistent;
// 1 or 2 per page persistent), and the same from the fastest loads.
func BenchmarkOverheadRTT(b *testing.B) {
	for _, rtt := range []time.Duration{20 * time.Millisecond, testbed.ContinentalRTT, 100 * time.Millisecond} {
		for _, ver := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
			tw := benchTwins(b, rtt, ver)
			for _, mode := range []Mode{NonPersistent, Persistent} {
				for _, par := range []int{1, 6} {
					name := fmt.Sprintf("rtt=%v/%s/%s/parallel=%d", rtt, map[uint16]string{tls.VersionTLS12: "tls1.2", tls.VersionTLS13: "tls1.3"}[ver], mode, par)
					b.Run(name, func(b *testing.B) { benchOverhead(b, tw, rtt, mode, par) })
				}
			}
			tw.Close()
		}
	}
}

func benchOverhead(b *testing.B, tw *testbed.Twins, rtt time.Duration, mode Mode, parallel int) {
	m := twinMeter(tw, Options{Parallel: parallel})
	hu, _ := url.Parse(tw.URL("http"))
	su, _ := url.Parse(tw.URL("https"))
	var loads []Load
	for i := 0; i < b.N; i++ {
		order := []*url.URL{hu, su}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, u := range order {
			l := m.LoadPage(context.Background(), u, mode)
			if !l.OK() {
				b.Fatal(l.Err)
			}
			l.Run = i
			loads = append(loads, l)
		}
	}
	ag := Aggregate([]SiteResult{{Site: "twin", Loads: loads}}, []Mode{mode})
	sa := ag.Sites[0]
	b.ReportMetric(sa.HTTPMS.Mean, "http-ms")
	b.ReportMetric(sa.HTTPSMS.Mean, "https-ms")
	b.ReportMetric(sa.MeanOverheadMS, "overhead-ms")
	b.ReportMetric(sa.MeanOverheadPct, "overhead-%")
	b.ReportMetric(sa.OverheadPerRequestMS, "overhead-ms/req")
	b.ReportMetric(sa.MeanOverheadMS/msOf(rtt), "overhead-RTTs/page")
	// The floor (fastest HTTPS − fastest HTTP load) is the overhead
	// without the scheduling noise of a shared machine, which only adds.
	b.ReportMetric((sa.HTTPSMS.Min-sa.HTTPMS.Min)/msOf(rtt), "floor-RTTs/page")
}

func benchTwins(b *testing.B, rtt time.Duration, ver uint16) *testbed.Twins {
	return benchTwinsCSS(b, rtt, ver, 0)
}

func benchTwinsCSS(b *testing.B, rtt time.Duration, ver uint16, cssImages int) *testbed.Twins {
	tw, err := testbed.StartTwins(testbed.TwinOptions{Objects: benchObjects, CSSImages: cssImages, ObjectSize: 1024, PageSize: 4096, RTT: rtt, TLSVersion: ver})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tw.Close() })
	return tw
}

// BenchmarkExtractCSSRefs is the CSS reader's throughput on a 1 MiB
// stylesheet made of copies of testdata/site.css (each copy's references
// made distinct so that none is de-duplicated away). Its reference:
// BenchmarkExtractRefsHTML, the HTML extractor (x/net/html's tokenizer)
// over a 1 MiB page, which every load already pays.
func BenchmarkExtractCSSRefs(b *testing.B) {
	css, err := os.ReadFile("testdata/site.css")
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	for i := 0; buf.Len() < 1<<20; i++ {
		buf.Write(bytes.ReplaceAll(css, []byte(".png"), fmt.Appendf(nil, ".png?%d", i)))
	}
	base, _ := url.Parse("https://www.example.com/css/site.css")
	refs := len(ExtractCSSRefs(base, buf.Bytes(), 0))
	b.SetBytes(int64(buf.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ExtractCSSRefs(base, buf.Bytes(), 0)
	}
	b.ReportMetric(float64(refs), "refs")
}

func BenchmarkExtractRefsHTML(b *testing.B) {
	doc, err := os.ReadFile("testdata/page.html")
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	for i := 0; buf.Len() < 1<<20; i++ {
		buf.Write(bytes.ReplaceAll(doc, []byte(".png"), fmt.Appendf(nil, ".png?%d", i)))
	}
	base, _ := url.Parse("https://www.example.com/index.html")
	refs := len(ExtractRefs(base, buf.Bytes(), 0))
	b.SetBytes(int64(buf.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ExtractRefs(base, buf.Bytes(), 0)
	}
	b.ReportMetric(float64(refs), "refs")
}
