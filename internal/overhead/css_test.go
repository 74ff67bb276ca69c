package overhead

import (
	"net/url"
	"os"
	"strings"
	"testing"
)

// cssRefStrings renders refs as "@URL" for imports and "URL" for url()s.
func cssRefStrings(refs []Ref) []string {
	var out []string
	for _, r := range refs {
		s := r.URL.String()
		if r.Kind == KindStylesheet {
			s = "@" + s
		}
		out = append(out, s)
	}
	return out
}

func TestExtractCSSRefs(t *testing.T) {
	base, _ := url.Parse("https://site.test/css/main.css")
	tests := []struct {
		name string
		css  string
		max  int
		want []string
	}{
		{"empty", "", 0, nil},
		{"garbage", "\x00\xff}}}{{{)))(((;;;", 0, nil},
		{"unquoted", `a{background:url(img/a.png)}`, 0, []string{"https://site.test/css/img/a.png"}},
		{"double quoted", `a{background:url("img/a.png")}`, 0, []string{"https://site.test/css/img/a.png"}},
		{"single quoted", `a{background:url('/a.png')}`, 0, []string{"https://site.test/a.png"}},
		{"whitespace inside", "a{background:url( \t\n '/a.png' \n )}", 0, []string{"https://site.test/a.png"}},
		{"whitespace around unquoted", "a{background:url(  /a.png  )}", 0, []string{"https://site.test/a.png"}},
		{"case-insensitive url", `a{b:URL(/a.png) Url(/b.png) uRl("/c.png")}`, 0,
			[]string{"https://site.test/a.png", "https://site.test/b.png", "https://site.test/c.png"}},
		{"escaped function name", `a{b:u\72l(/a.png); c:\75\52\4c(/b.png)}`, 0, []string{"https://site.test/a.png", "https://site.test/b.png"}},
		{"escapes in unquoted url", `a{b:url(/a\)b\ c\28.png)}`, 0, []string{"https://site.test/a%29b%20c%28.png"}},
		{"hex escape and its whitespace", "a{b:url(/\\61 .png) c:url(\"/\\62\r\n\\2e png\") d:url(/\\1F600.png)}", 0,
			[]string{"https://site.test/a.png", "https://site.test/b.png", "https://site.test/%F0%9F%98%80.png"}},
		{"escapes in string", `a{b:url("/a\".png") c:url('/b\'.png')}`, 0, []string{"https://site.test/a%22.png", "https://site.test/b'.png"}},
		{"line continuation in string", "a{b:url(\"/a\\\n.png\")}", 0, []string{"https://site.test/a.png"}},
		{"newline in url string is a bad string", "a{b:url(\"/a\n.png\")}", 0, nil},
		{"newline in string is a bad string", "a{b:\"url(/no.png)\n} c{d:url(/ok.png)}", 0, []string{"https://site.test/ok.png"}},
		{"quote in unquoted url is a bad url", `a{b:url(/a"b.png) c:url(/ok.png)}`, 0, []string{"https://site.test/ok.png"}},
		{"inner whitespace is a bad url", `a{b:url(/a b.png) c:url(/ok.png)}`, 0, []string{"https://site.test/ok.png"}},
		{"open paren is a bad url", `a{b:url(/a(b).png) c:url(/ok.png)}`, 0, []string{"https://site.test/ok.png"}},
		{"bad url skips an escaped paren", `a{b:url(/a b\).png) c:url(/ok.png)}`, 0, []string{"https://site.test/ok.png"}},
		{"url modifiers", `a{b:url("/a.png" crossorigin(anonymous)) c:url(/ok.png)}`, 0, []string{"https://site.test/ok.png"}},
		{"comments", `/* url(/c1.png) @import "c2.css"; */ a{b:/* url(/c3.png) */url(/ok.png)} /* url(/c4.png)`, 0,
			[]string{"https://site.test/ok.png"}},
		{"comment inside url is part of it", `a{b:url(/a/*x*/.png)}`, 0, []string{"https://site.test/a/*x*/.png"}},
		{"string is not a url", `a{content:"url(/no.png)"; b:'@import url(/no.css);'}`, 0, nil},
		{"url must begin an ident", `a{b:xurl(/a.png) -url(/b.png) 10url(/c.png) #url(/d.png) @url(/e.png) a\url(/f.png)}`, 0, nil},
		{"data and other schemes skipped", `a{b:url(data:image/png;base64,AAAA) c:url("javascript:x") d:url(ftp://h/x) e:url(/ok.png)}`, 0,
			[]string{"https://site.test/ok.png"}},
		{"fragment-only and empty skipped", `a{filter:url(#blur) b:url() c:url("") d:url("  ")}`, 0, nil},
		{"fragment dropped, duplicates once", `a{b:url(/a.png#x) c:url(/a.png) d:url(https://site.test/a.png)}`, 0, []string{"https://site.test/a.png"}},
		{"absolute and scheme-relative", `a{b:url(http://cdn.test/a.png) c:url(//cdn.test/b.png)}`, 0,
			[]string{"http://cdn.test/a.png", "https://cdn.test/b.png"}},
		{"unclosed url at EOF", `a{b:url(/a.png`, 0, []string{"https://site.test/a.png"}},
		{"unclosed string at EOF", `a{b:url("/a.png`, 0, []string{"https://site.test/a.png"}},
		{"nested functions", `a{b:image-set(url(/1x.png) 1x, url(/2x.png) 2x); c:var(--x, url(/v.png))}`, 0,
			[]string{"https://site.test/1x.png", "https://site.test/2x.png", "https://site.test/v.png"}},
		{"custom property", `:root{--bg:url(/p.png)}`, 0, []string{"https://site.test/p.png"}},
		{"font-face", `@font-face{font-family:x;src:url(/f.woff2) format("woff2"),url(/f.woff) format("woff")}`, 0,
			[]string{"https://site.test/f.woff2", "https://site.test/f.woff"}},
		{"media block", `@media (min-width: 10px) { a { b: url(/m.png) } }`, 0, []string{"https://site.test/m.png"}},
		{"max", `a{b:url(/1) c:url(/2) d:url(/3)}`, 2, []string{"https://site.test/1", "https://site.test/2"}},

		{"import string", `@import "more.css";`, 0, []string{"@https://site.test/css/more.css"}},
		{"import url", `@import url(more.css);`, 0, []string{"@https://site.test/css/more.css"}},
		{"import quoted url", `@import url('more.css') screen and (min-width: 0);`, 0, []string{"@https://site.test/css/more.css"}},
		{"import case and escapes", `@IMPORT "a.css"; @Import url(b.css); @\69mport "c.css";`, 0,
			[]string{"@https://site.test/css/a.css", "@https://site.test/css/b.css", "@https://site.test/css/c.css"}},
		{"import without whitespace", `@import"a.css";@import url(b.css)`, 0, []string{"@https://site.test/css/a.css", "@https://site.test/css/b.css"}},
		{"import at EOF without semicolon", `@import "a.css"`, 0, []string{"@https://site.test/css/a.css"}},
		{"import with layer and supports", `@import url(a.css) layer(base) supports(display: grid) screen;`, 0, []string{"@https://site.test/css/a.css"}},
		{"import after charset, layer and comments", "@charset \"utf-8\";\n<!-- -->/* x */@layer a, b;\n@import \"a.css\";", 0,
			[]string{"@https://site.test/css/a.css"}},
		{"import after a rule is ignored", `a{} @import "late.css"; b{c:url(/ok.png)}`, 0, []string{"https://site.test/ok.png"}},
		{"import after a namespace is ignored", `@namespace svg url(http://www.w3.org/2000/svg); @import "late.css";`, 0, nil},
		{"import after a layer block is ignored", `@layer a { } @import "late.css";`, 0, nil},
		{"import inside a block is ignored", `@media print { @import "nested.css"; a { b: url(/ok.png) } }`, 0, []string{"https://site.test/ok.png"}},
		{"import with an ident first is ignored", `@import foo "a.css"; @import "b.css";`, 0, []string{"@https://site.test/css/b.css"}},
		{"import with a block is dropped with it", `@import "a.css" { x { y: url(/no.png) } } a{b:url(/ok.png)}`, 0, []string{"https://site.test/ok.png"}},
		{"import of a bad string", "@import \"a\n;\n@import \"b.css\";", 0, []string{"@https://site.test/css/b.css"}},
		{"import url is not also a url ref", `@import url(a.css); a{b:url(a.css)}`, 0, []string{"@https://site.test/css/a.css"}},
		{"namespace url not fetched", `@namespace url(http://www.w3.org/1999/xhtml); a{b:url(/ok.png)}`, 0, []string{"https://site.test/ok.png"}},
		{"semicolon inside parens does not end import", `@import url(a.css) supports(a: b; c: d); @import "b.css";`, 0,
			[]string{"@https://site.test/css/a.css", "@https://site.test/css/b.css"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			refs := ExtractCSSRefs(base, []byte(tc.css), tc.max)
			for _, r := range refs {
				if !r.CSS {
					t.Errorf("ref %s lacks CSS", r.URL)
				}
			}
			got := cssRefStrings(refs)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestScanCSSDeclarations checks style attributes: a declaration list, in
// which no @import is valid.
func TestScanCSSDeclarations(t *testing.T) {
	var got []string
	scanCSS([]byte(`@import "no.css"; background: url(/a.png); --x: url('/b.png')`), true, func(raw string, isImport bool) bool {
		if isImport {
			raw = "@" + raw
		}
		got = append(got, raw)
		return true
	})
	if strings.Join(got, " ") != "/a.png /b.png" {
		t.Errorf("got %q, want the two url()s and no import", got)
	}
}

func TestExtractCSSRefsFixture(t *testing.T) {
	css, err := os.ReadFile("testdata/site.css")
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse("https://www.example.com/css/site.css")
	want := []string{
		"@https://www.example.com/css/reset.css",
		"@https://fonts.example.net/css?family=Serif",
		"https://www.example.com/img/bg.png",
		"https://www.example.com/css/img/sprite.png",
		"https://www.example.com/fonts/x.woff2",
		"https://www.example.com/fonts/x.woff",
		"https://cdn.example.net/hero.jpg",
		"https://www.example.com/img/print.png",
	}
	got := cssRefStrings(ExtractCSSRefs(base, css, 0))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// FuzzExtractCSSRefs checks that no input makes the CSS extractor panic or
// loop, and that what it returns is always fetchable: absolute http(s) URLs
// with a host, no fragment, no duplicates, at most max of them, each an
// import or a url().
func FuzzExtractCSSRefs(f *testing.F) {
	if css, err := os.ReadFile("testdata/site.css"); err == nil {
		f.Add(css, 0)
	}
	f.Add([]byte(`@import url("a.css");a{b:url(/x.png)}`), 0)
	f.Add([]byte(`a{b:u\72l(x\)y) c:url("\0 \D800\110000")}`), 1)
	f.Add([]byte("@import 'a\\\r\n.css' { } /* url(x) "), 3)
	f.Add([]byte("url(\x00) url(\"\x00\") \\\x00rl(x) @i\\\x00mport"), 0)
	base, _ := url.Parse("https://fuzz.test/css/s.css")
	f.Fuzz(func(t *testing.T, css []byte, max int) {
		if max < 0 || max > 1000 {
			max = 0
		}
		refs := ExtractCSSRefs(base, css, max)
		checkRefs(t, refs, max)
		for _, r := range refs {
			u := r.URL
			if !r.CSS || (r.Kind != KindStylesheet && r.Kind != KindCSSURL) {
				t.Fatalf("ref %q has kind %q, CSS %v", u, r.Kind, r.CSS)
			}
		}
		// A style attribute is a declaration list: never an import.
		scanCSS(css, true, func(raw string, isImport bool) bool {
			if isImport {
				t.Fatalf("import of %q in a declaration list", raw)
			}
			return true
		})
	})
}
