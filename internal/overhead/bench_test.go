package overhead

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
)

const benchObjects = 10

// BenchmarkPageLoad is the tool's own cost: whole-page loads per second on
// loopback with no added delay (page + 10 objects of 1 KiB), with
// httptrace, HTML parsing and bookkeeping. Compare with BenchmarkBareFetch,
// the ceiling: the same requests from a bare net/http client in the same
// run.
func BenchmarkPageLoad(b *testing.B) {
	tw := benchTwins(b, 0, tls.VersionTLS13)
	for _, mode := range []Mode{NonPersistent, Persistent} {
		for _, scheme := range []string{"http", "https"} {
			b.Run(fmt.Sprintf("%s/%s", mode, scheme), func(b *testing.B) {
				m := twinMeter(tw, Options{})
				u, _ := url.Parse(tw.URL(scheme))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if l := m.LoadPage(context.Background(), u, mode); !l.OK() || l.Requests != benchObjects+1 {
						b.Fatalf("load: %s, %d requests", l.Err, l.Requests)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "loads/s")
			})
		}
	}
}

// BenchmarkBareFetch is BenchmarkPageLoad's ceiling: a plain net/http
// client fetching the same page and objects (URLs known in advance, no
// tracing, no parsing), with a fresh Transport per page load as the tool
// uses.
func BenchmarkBareFetch(b *testing.B) {
	tw := benchTwins(b, 0, tls.VersionTLS13)
	for _, mode := range []Mode{NonPersistent, Persistent} {
		for _, scheme := range []string{"http", "https"} {
			b.Run(fmt.Sprintf("%s/%s", mode, scheme), func(b *testing.B) {
				addr := tw.HTTP.String()
				if scheme == "https" {
					addr = tw.HTTPS.String()
				}
				urls := []string{tw.URL(scheme)}
				for i := 0; i < benchObjects; i++ {
					ext := []string{"png", "js", "css"}[i%3]
					urls = append(urls, fmt.Sprintf("%s://%s/obj/%d.%s", scheme, tw.Host, i, ext))
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
			})
		}
	}
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
	tw, err := testbed.StartTwins(testbed.TwinOptions{Objects: benchObjects, ObjectSize: 1024, PageSize: 4096, RTT: rtt, TLSVersion: ver})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tw.Close() })
	return tw
}
