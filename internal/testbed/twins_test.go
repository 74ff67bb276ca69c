package testbed

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// twinClient reaches the twins through their Lookup, verifying against
// their CA, and never follows redirects.
func twinClient(tw *Twins) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, port, _ := net.SplitHostPort(addr)
				p := 80
				if port == "443" {
					p = 443
				}
				a, err := tw.Lookup(ctx, host, p)
				if err != nil {
					return nil, err
				}
				var d net.Dialer
				return d.DialContext(ctx, network, a[0].String())
			},
			TLSClientConfig: &tls.Config{RootCAs: tw.CA.Pool()},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func TestTwins(t *testing.T) {
	for _, ver := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(ver), func(t *testing.T) {
			tw, err := StartTwins(TwinOptions{Objects: 4, ObjectSize: 100, PageSize: 2000, TLSVersion: ver})
			if err != nil {
				t.Fatal(err)
			}
			defer tw.Close()
			c := twinClient(tw)
			bodies := map[string]string{}
			for _, scheme := range []string{"http", "https"} {
				for _, path := range []string{"", "obj/0.png", "obj/1.js", "obj/2.css", "obj/3.png"} {
					resp, err := c.Get(tw.URL(scheme) + path)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Fatalf("%s%s: status %d", tw.URL(scheme), path, resp.StatusCode)
					}
					if scheme == "https" && resp.TLS.Version != ver {
						t.Errorf("negotiated %s, want %s", tls.VersionName(resp.TLS.Version), tls.VersionName(ver))
					}
					if prev, ok := bodies[path]; ok && prev != string(b) {
						t.Errorf("%s differs between HTTP and HTTPS", path)
					}
					bodies[path] = string(b)
				}
			}
			if len(bodies[""]) != tw.PageBytes() || tw.PageBytes() < 2000 || len(bodies["obj/0.png"]) != 100 {
				t.Errorf("page %d bytes (PageBytes %d, want ≥ 2000), object %d bytes (want 100)", len(bodies[""]), tw.PageBytes(), len(bodies["obj/0.png"]))
			}
			if n := strings.Count(bodies[""], "/obj/"); n != 4 {
				t.Errorf("page references %d objects, want 4", n)
			}
			for _, bad := range []string{"obj/4.png", "obj/0.js", "obj/x.png", "nothing"} {
				resp, err := c.Get(tw.URL("http") + bad)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 404 {
					t.Errorf("%s: status %d, want 404", bad, resp.StatusCode)
				}
			}
		})
	}
}

func TestTwinsRedirects(t *testing.T) {
	tw, err := StartTwins(TwinOptions{Redirect: true, UpgradeHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	c := twinClient(tw)
	for _, tc := range []struct{ url, loc string }{
		{tw.URL("http"), "https://twin.test/"},
		{tw.URL("https"), "/index.html"},
	} {
		resp, err := c.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 != 3 || loc != tc.loc {
			t.Errorf("%s: %d to %q, want a redirect to %q", tc.url, resp.StatusCode, loc, tc.loc)
		}
	}
	if _, err := tw.Lookup(context.Background(), "twin.test", 8080); err == nil {
		t.Error("Lookup of port 8080 succeeded; the twins serve 80 and 443 only")
	}
	if _, err := tw.Lookup(context.Background(), "other.test", 443); err == nil {
		t.Error("Lookup of another host succeeded")
	}
	if _, err := StartTwins(TwinOptions{TLSVersion: tls.VersionTLS11}); err == nil {
		t.Error("TLS 1.1 twins started")
	}
}
