package overhead

import (
	"net/url"
	"os"
	"strings"
	"testing"
)

func TestExtractRefsFixture(t *testing.T) {
	doc, err := os.ReadFile("testdata/page.html")
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse("https://www.example.com/dir/index.html")
	got := ExtractRefs(base, doc, 0)
	want := []struct{ url, kind string }{
		{"https://www.example.com/css/site.css", KindStylesheet},
		{"https://www.example.com/dir/favicon.ico", KindIcon},
		{"https://cdn.example.net/lib.js", KindScript},
		{"https://www.example.com/img/logo.png", KindImage},
		{"https://www.example.com/dir/img/relative.png", KindImage},
		{"https://cdn.example.net/proto-relative.js", KindScript},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d refs, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].URL.String() != w.url || got[i].Kind != w.kind {
			t.Errorf("ref %d = %s (%s), want %s (%s)", i, got[i].URL, got[i].Kind, w.url, w.kind)
		}
	}
}

func TestExtractRefs(t *testing.T) {
	base, _ := url.Parse("http://site.test/a/b.html")
	tests := []struct {
		name string
		doc  string
		max  int
		want []string
	}{
		{"empty", "", 0, nil},
		{"not html", "\x00\xff garbage <<<>>>", 0, nil},
		{"base href", `<base href="https://other.test/x/"><img src="i.png"><base href="/ignored/"><img src="j.png">`, 0,
			[]string{"https://other.test/x/i.png", "https://other.test/x/j.png"}},
		{"base href not http", `<base href="ftp://x/"><img src="i.png">`, 0, []string{"http://site.test/a/i.png"}},
		{"max", `<img src=1><img src=2><img src=3>`, 2, []string{"http://site.test/a/1", "http://site.test/a/2"}},
		{"first duplicate attribute wins", `<img src="1" src="2">`, 0, []string{"http://site.test/a/1"}},
		{"self-closing and unquoted", `<img src=/x.png /><link rel=stylesheet href=/s.css />`, 0,
			[]string{"http://site.test/x.png", "http://site.test/s.css"}},
		{"unclosed tag", `<img src="/x.png`, 0, nil},
		{"bad url", `<img src="http://[::1">`, 0, nil},
		{"host-less", `<img src="http:///x">`, 0, nil},
		{"script body ignored", `<script>document.write('<img src="/no.png">')</script>`, 0, nil},
		{"icon rel list", `<link rel="apple-touch-icon icon" href="/i.png">`, 0, []string{"http://site.test/i.png"}},
		{"style block", `<style>@import "s.css"; body { background: url(/bg.png) } /* url(/no.png) */</style><img src="/i.png">`, 0,
			[]string{"http://site.test/a/s.css", "http://site.test/bg.png", "http://site.test/i.png"}},
		{"style block without end tag", `<STYLE type="text/css">a{b:url(/bg.png)}`, 0, []string{"http://site.test/bg.png"}},
		{"style block entities are not decoded", `<style>a{b:url(/a&amp;b.png)}</style>`, 0, []string{"http://site.test/a&amp;b.png"}},
		{"style attribute", `<div style="background-image: url('/d.png')"></div><img src="/i.png" style="border-image:url(/b.png) 30">`, 0,
			[]string{"http://site.test/d.png", "http://site.test/i.png", "http://site.test/b.png"}},
		{"style attribute entities are decoded", `<p style="background:url(&quot;/q.png&quot;)">`, 0, []string{"http://site.test/q.png"}},
		{"no import in a style attribute", `<p style="@import '/no.css'; background:url(/ok.png)">`, 0, []string{"http://site.test/ok.png"}},
		{"style relative to base href", `<base href="https://other.test/x/"><style>a{b:url(i.png)}</style>`, 0, []string{"https://other.test/x/i.png"}},
		{"style and markup deduplicated", `<img src="/i.png"><p style="background:url(/i.png)">`, 0, []string{"http://site.test/i.png"}},
		{"max counts css", `<style>a{b:url(/1) c:url(/2)}</style><img src=/3>`, 1, []string{"http://site.test/1"}},
		{"style in a script is text", `<script>x = "<style>a{b:url(/no.png)}</style>"</script>`, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ExtractRefs(base, []byte(tc.doc), tc.max)
			var urls []string
			for _, r := range got {
				urls = append(urls, r.URL.String())
			}
			if strings.Join(urls, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %q, want %q", urls, tc.want)
			}
		})
	}
}

// FuzzExtractRefs checks that no input makes the extractor panic and that
// what it returns is always fetchable: absolute http(s) URLs with a host,
// no fragment, no duplicates, at most max of them.
func FuzzExtractRefs(f *testing.F) {
	if doc, err := os.ReadFile("testdata/page.html"); err == nil {
		f.Add(doc, 0)
	}
	f.Add([]byte(`<base href="//x/"><img src="a"><link rel=stylesheet href=b>`), 1)
	f.Add([]byte(`<script src="http://[::1]:80/x"></script><img src="#">`), 0)
	f.Add([]byte("<img src=\"\x00\">"), 3)
	f.Add([]byte(`<style>@import "a.css";a{b:url(x)}</style><p style="c:url('y')">`), 0)
	base, _ := url.Parse("https://fuzz.test/p/")
	f.Fuzz(func(t *testing.T, doc []byte, max int) {
		if max < 0 || max > 1000 {
			max = 0
		}
		refs := ExtractRefs(base, doc, max)
		checkRefs(t, refs, max)
		for _, r := range refs {
			u := r.URL
			switch r.Kind {
			case KindImage, KindScript, KindIcon:
				if r.CSS {
					t.Fatalf("%s ref %q marked as from CSS", r.Kind, u)
				}
			case KindStylesheet:
			case KindCSSURL:
				if !r.CSS {
					t.Fatalf("css-url ref %q not marked as from CSS", u)
				}
			default:
				t.Fatalf("ref %q has kind %q", u, r.Kind)
			}
		}
	})
}

// checkRefs checks what every extractor promises: at most max references
// (when max > 0), each fetchable over HTTP(S), without a fragment, once.
func checkRefs(t *testing.T, refs []Ref, max int) {
	t.Helper()
	if max > 0 && len(refs) > max {
		t.Fatalf("%d refs with max %d", len(refs), max)
	}
	seen := map[string]bool{}
	for _, r := range refs {
		u := r.URL
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
			t.Fatalf("unfetchable ref %q", u)
		}
		if seen[u.String()] {
			t.Fatalf("duplicate ref %q", u)
		}
		seen[u.String()] = true
	}
}
