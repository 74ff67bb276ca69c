package testbed

import (
	"context"
	"crypto/tls"
	"fmt"
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

// TestTwinsCSS checks the CSS twins' content: every background image is
// referenced from exactly one of its four places, relative to that place,
// the stylesheets are served as text/css and the images exist.
func TestTwinsCSS(t *testing.T) {
	const images = 8
	tw, err := StartTwins(TwinOptions{Objects: 1, CSSImages: images, ObjectSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	c := twinClient(tw)
	get := func(scheme, path string) (string, *http.Response) {
		t.Helper()
		resp, err := c.Get(tw.URL(scheme) + strings.TrimPrefix(path, "/"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b), resp
	}
	page, _ := get("https", "/")
	main, resp := get("https", TwinMainCSS)
	imported, resp2 := get("http", TwinImportedCSS)
	for _, r := range []*http.Response{resp, resp2} {
		if r.StatusCode != 200 || r.Header.Get("Content-Type") != "text/css; charset=utf-8" {
			t.Errorf("%s: %d %q, want a 200 text/css stylesheet", r.Request.URL, r.StatusCode, r.Header.Get("Content-Type"))
		}
	}
	if len(main)+len(imported) != tw.StylesheetBytes() {
		t.Errorf("stylesheets %d bytes, StylesheetBytes %d", len(main)+len(imported), tw.StylesheetBytes())
	}
	if !strings.Contains(page, `<link rel="stylesheet" href="/css/main.css">`) || !strings.Contains(main, `@import url("more/imported.css")`) ||
		!strings.Contains(imported, `@import "../main.css"`) {
		t.Errorf("page, main.css or imported.css lacks its link or @import:\n%s\n%s\n%s", page, main, imported)
	}
	// Where each image must be referenced, in that place's own relative form.
	for i := 0; i < images; i++ {
		where, ref := []string{main, imported, page, page}[i%4], []string{
			fmt.Sprintf("url(img/%d.png)", i),
			fmt.Sprintf("url('../img/%d.png')", i),
			fmt.Sprintf(`url("/css/img/%d.png")`, i),
			fmt.Sprintf("url(&quot;css/img/%d.png&quot;)", i),
		}[i%4]
		if !strings.Contains(where, ref) {
			t.Errorf("image %d: %q not found", i, ref)
		}
		body, r := get([]string{"http", "https"}[i%2], TwinCSSImage(i))
		if r.StatusCode != 200 || len(body) != 64 || r.Header.Get("Content-Type") != "image/png" {
			t.Errorf("%s: %d, %d bytes, %q", TwinCSSImage(i), r.StatusCode, len(body), r.Header.Get("Content-Type"))
		}
	}
	for _, bad := range []string{"/css/img/8.png", "/css/img/commented.png", "/css/img/07.png", "/css/ignored.css", "/css/more/ignored.css"} {
		if _, r := get("http", bad); r.StatusCode != 404 {
			t.Errorf("%s: status %d, want 404", bad, r.StatusCode)
		}
	}
	if got, want := tw.LoadRequests(), 1+1+2+images; got != want {
		t.Errorf("LoadRequests %d, want %d", got, want)
	}
	if got, want := tw.LoadBytes(), len(page)+(1+images)*64+len(main)+len(imported); got != want {
		t.Errorf("LoadBytes %d, want %d", got, want)
	}
	hits := tw.Hits()
	if hits["https /"] != 1 || hits["https "+TwinMainCSS] != 1 || hits["http "+TwinImportedCSS] != 1 || hits["http /css/img/8.png"] != 1 {
		t.Errorf("hits %v", hits)
	}
	// Without CSSImages there are no stylesheets.
	plain, err := StartTwins(TwinOptions{Objects: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	c = twinClient(plain)
	if _, r := get("http", TwinMainCSS); r.StatusCode != 404 {
		t.Errorf("plain twins serve %s: %d", TwinMainCSS, r.StatusCode)
	}
	if plain.LoadRequests() != 2 || plain.StylesheetBytes() != 0 {
		t.Errorf("plain twins: LoadRequests %d, StylesheetBytes %d", plain.LoadRequests(), plain.StylesheetBytes())
	}
	if _, err := StartTwins(TwinOptions{CSSImages: -1}); err == nil {
		t.Error("twins with -1 CSS images started")
	}
}
