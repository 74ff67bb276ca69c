package overhead

import (
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pkie/pkie/internal/testbed"
)

// TestCSSObjects loads twins whose page has a linked stylesheet, an
// @import'ed one, a <style> block and style attributes referencing
// background images, over both schemes in both modes, and checks on the
// servers' own counts that every object is fetched exactly once per load,
// nothing else is (comments, data: URIs, fragments, duplicates, the @import
// cycle, the misplaced @import), and connections are used as the mode
// says: one per load persistent, one per object non-persistent.
func TestCSSObjects(t *testing.T) {
	const objects, images, runs = 2, 8, 2
	for _, mode := range []Mode{Persistent, NonPersistent} {
		t.Run(string(mode), func(t *testing.T) {
			tw := startTwins(t, testbed.TwinOptions{Objects: objects, CSSImages: images, ObjectSize: 256})
			m := twinMeter(tw, Options{Runs: runs, Modes: []Mode{mode}, KeepObjects: true})
			rep := m.Measure(context.Background(), []Site{mustSite(t, tw.Host)})
			if len(rep.Unresponsive) > 0 {
				t.Fatalf("unresponsive: %+v", rep.Unresponsive)
			}
			perLoad := tw.LoadRequests() // page + 2 objects + 2 stylesheets + 8 images
			if perLoad != 1+objects+2+images {
				t.Fatalf("twins say a load is %d requests", perLoad)
			}
			const fromCSS = 1 + images // imported.css and the images; main.css is linked by the HTML
			conns := 1
			if mode == NonPersistent {
				conns = perLoad
			}
			loads := rep.Sites[0].Loads
			if len(loads) != 2*runs {
				t.Fatalf("%d loads, want %d", len(loads), 2*runs)
			}
			for _, l := range loads {
				hs := conns
				if l.Scheme == "http" {
					hs = 0
				}
				if !l.OK() || l.Requests != perLoad || l.CSSObjects != fromCSS || l.Failed != 0 || l.Conns != conns || l.Handshakes != hs || l.Bytes != int64(tw.LoadBytes()) {
					t.Errorf("%s load %d: ok %v (%s), %d requests, %d from CSS, %d failed, %d conns, %d handshakes, %d bytes; want %d, %d, 0, %d, %d, %d",
						l.Scheme, l.Run, l.OK(), l.Err, l.Requests, l.CSSObjects, l.Failed, l.Conns, l.Handshakes, l.Bytes, perLoad, fromCSS, conns, hs, tw.LoadBytes())
				}
				checkCSSProvenance(t, l, images)
			}
			// The servers' side: each expected path exactly once per load
			// of its scheme, and nothing else.
			want := map[string]int64{}
			paths := []string{"/", "/obj/0.png", "/obj/1.js", testbed.TwinMainCSS, testbed.TwinImportedCSS}
			for i := 0; i < images; i++ {
				paths = append(paths, testbed.TwinCSSImage(i))
			}
			for _, scheme := range []string{"http", "https"} {
				for _, p := range paths {
					want[scheme+" "+p] = runs
				}
			}
			got := tw.Hits()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("servers answered\n%v\nwant\n%v", sortedHits(got), sortedHits(want))
			}
			httpConns, httpsConns := tw.Conns()
			if httpConns != int64(runs*conns) || httpsConns != int64(runs*conns) {
				t.Errorf("servers accepted %d HTTP and %d HTTPS connections, want %d each", httpConns, httpsConns, runs*conns)
			}
			if sa := rep.Aggregates.Sites[0]; sa.CSSObjects != fromCSS || sa.Requests != float64(perLoad) {
				t.Errorf("aggregate: %.1f CSS objects, %.1f requests per load; want %d, %d", sa.CSSObjects, sa.Requests, fromCSS, perLoad)
			}
		})
	}
}

// checkCSSProvenance checks each object's kind, FromCSS and Via against
// where the twins put its reference.
func checkCSSProvenance(t *testing.T, l Load, images int) {
	t.Helper()
	origin := l.Scheme + "://twin.test"
	want := map[string][3]string{ // path → kind, from CSS, via
		"/":                     {KindPage, "false", ""},
		"/obj/0.png":            {KindImage, "false", ""},
		"/obj/1.js":             {KindScript, "false", ""},
		testbed.TwinMainCSS:     {KindStylesheet, "false", ""},
		testbed.TwinImportedCSS: {KindStylesheet, "true", origin + testbed.TwinMainCSS},
	}
	for i := 0; i < images; i++ {
		via := []string{origin + testbed.TwinMainCSS, origin + testbed.TwinImportedCSS, "", ""}[i%4]
		want[testbed.TwinCSSImage(i)] = [3]string{KindCSSURL, "true", via}
	}
	if len(l.Objects) != len(want) {
		t.Errorf("%s load %d: %d objects, want %d", l.Scheme, l.Run, len(l.Objects), len(want))
	}
	for _, o := range l.Objects {
		u, _ := url.Parse(o.URL)
		got := [3]string{o.Kind, fmt.Sprint(o.FromCSS), o.Via}
		if w, ok := want[u.Path]; !ok || got != w {
			t.Errorf("%s load %d: %s is %q, want %q", l.Scheme, l.Run, o.URL, got, w)
		}
	}
}

func sortedHits(m map[string]int64) string {
	var lines []string
	for k, v := range m {
		lines = append(lines, fmt.Sprintf("  %s: %d", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestCSSParallel fetches the CSS twins six objects at a time: the queue
// grows while stylesheets arrive, and still every object is fetched once.
func TestCSSParallel(t *testing.T) {
	tw := startTwins(t, testbed.TwinOptions{Objects: 6, CSSImages: 12})
	m := twinMeter(tw, Options{Parallel: 6})
	for _, scheme := range []string{"http", "https"} {
		u, _ := url.Parse(tw.URL(scheme))
		for _, mode := range []Mode{Persistent, NonPersistent} {
			l := m.LoadPage(context.Background(), u, mode)
			if !l.OK() || l.Requests != tw.LoadRequests() || l.CSSObjects != 13 || l.Failed != 0 {
				t.Errorf("%s %s: ok %v (%s), %d requests, %d from CSS, %d failed; want %d, 13, 0", scheme, mode, l.OK(), l.Err, l.Requests, l.CSSObjects, l.Failed, tw.LoadRequests())
			}
		}
	}
	for k, v := range tw.Hits() {
		if v != 2 {
			t.Errorf("%s requested %d times in 2 loads", k, v)
		}
	}
}

// TestCSSRules checks which stylesheets are read and how far: by status,
// Content-Type, redirects, compression, @import depth, the object cap and
// IgnoreCSS.
func TestCSSRules(t *testing.T) {
	files := map[string]struct {
		ctype, body string
		status      int
	}{
		"/":                   {"text/html", `<link rel=stylesheet href=/ok.css><link rel=stylesheet href=/html.css><link rel=stylesheet href=/missing.css><link rel=stylesheet href=/notype.css><link rel=stylesheet href=/moved.css><link rel=stylesheet href=/gz.css><link rel=stylesheet href=/d0.css><img src=/hero.png>`, 200},
		"/ok.css":             {"text/css; charset=utf-8", `a{b:url(ok.png)} c{d:url(/hero.png)}`, 200},
		"/html.css":           {"text/html", `<p>a{b:url(/from-html-type.png)}`, 200},
		"/missing.css":        {"text/css", `a{b:url(/from-404.png)}`, 404},
		"/notype.css":         {"", `a{b:url(/notype.png)}`, 200},
		"/sub/real.css":       {"text/css", `a{b:url(rel.png)}`, 200},
		"/gz.css":             {"text/css", `a{b:url(/gz.png)}`, 200},
		"/ok.png":             {"image/png", "x", 200},
		"/hero.png":           {"image/png", "x", 200},
		"/notype.png":         {"image/png", "x", 200},
		"/sub/rel.png":        {"image/png", "x", 200},
		"/gz.png":             {"image/png", "x", 200},
		"/from-404.png":       {"image/png", "x", 200},
		"/from-html-type.png": {"image/png", "x", 200},
	}
	for i := 0; i < 10; i++ { // an @import chain ten deep
		files[fmt.Sprintf("/d%d.css", i)] = struct {
			ctype, body string
			status      int
		}{"text/css", fmt.Sprintf(`@import "d%d.css"; a{b:url(/i%d.png)}`, i+1, i), 200}
		files[fmt.Sprintf("/i%d.png", i)] = struct {
			ctype, body string
			status      int
		}{"image/png", "x", 200}
	}
	hits := map[string]int{}
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/moved.css" {
			http.Redirect(w, r, "/sub/real.css", http.StatusFound)
			return
		}
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if f.ctype != "" {
			w.Header().Set("Content-Type", f.ctype)
		} else {
			w.Header()["Content-Type"] = nil // no sniffing: no type at all
		}
		if r.URL.Path == "/gz.css" {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zw.Write([]byte(f.body))
			zw.Close()
			return
		}
		w.WriteHeader(f.status)
		w.Write([]byte(f.body))
	}))
	defer srv.Close()
	u, _ := url.Parse("http://css.test/")
	load := func(o Options) Load {
		for k := range hits {
			delete(hits, k)
		}
		o.AllowPrivate, o.Lookup, o.KeepObjects = true, fixedLookup(srv.URL), true
		return New(o).LoadPage(context.Background(), u, Persistent)
	}

	l := load(Options{})
	want := []string{"/", "/ok.css", "/html.css", "/missing.css", "/notype.css", "/moved.css", "/sub/real.css", "/gz.css",
		"/d0.css", "/hero.png", "/ok.png", "/notype.png", "/sub/rel.png", "/gz.png", "/d1.css", "/i0.png",
		"/d2.css", "/i1.png", "/d3.css", "/i2.png", "/d4.css", "/i3.png", "/i4.png"}
	var got []string
	for _, o := range l.Objects {
		p, _ := url.Parse(o.URL)
		got = append(got, p.Path)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("fetched (in order)\n%q\nwant\n%q", got, want)
	}
	// ok.png, notype.png, rel.png, gz.png, d1–d4, i0–i4.
	if !l.OK() || l.CSSObjects != 13 || l.Failed != 1 {
		t.Errorf("ok %v (%s), %d from CSS, %d failed; want 13 from CSS and 1 failed (missing.css)", l.OK(), l.Err, l.CSSObjects, l.Failed)
	}
	for _, p := range []string{"/from-html-type.png", "/from-404.png", "/d5.css", "/i5.png"} {
		if hits[p] != 0 {
			t.Errorf("%s fetched", p)
		}
	}
	if hits["/hero.png"] != 1 {
		t.Errorf("/hero.png, referenced by the HTML and by ok.css, fetched %d times", hits["/hero.png"])
	}

	t.Run("max objects", func(t *testing.T) {
		// The HTML's 8 references and 2 of what the CSS references.
		if l := load(Options{MaxObjects: 10}); l.Requests != 1+10+1 || l.CSSObjects != 2 { // +1: moved.css's redirect hop
			t.Errorf("%d requests, %d from CSS; want 12 and 2", l.Requests, l.CSSObjects)
		}
	})
	t.Run("ignore css", func(t *testing.T) {
		if l := load(Options{IgnoreCSS: true}); l.Requests != 1+8+1 || l.CSSObjects != 0 {
			t.Errorf("%d requests, %d from CSS; want 10 and 0", l.Requests, l.CSSObjects)
		}
	})
	t.Run("ignore css inline", func(t *testing.T) {
		tw := startTwins(t, testbed.TwinOptions{CSSImages: 4})
		m := twinMeter(tw, Options{IgnoreCSS: true})
		tu, _ := url.Parse(tw.URL("https"))
		if l := m.LoadPage(context.Background(), tu, Persistent); l.Requests != 2 || l.CSSObjects != 0 {
			t.Errorf("%d requests, %d from CSS; want the page and main.css only", l.Requests, l.CSSObjects)
		}
	})
}
