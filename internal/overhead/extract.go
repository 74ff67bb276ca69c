package overhead

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// Kinds of object a page load fetches.
const (
	KindPage       = "page"       // the HTML document
	KindImage      = "image"      // <img src>
	KindScript     = "script"     // <script src>
	KindStylesheet = "stylesheet" // <link rel=stylesheet href>
	KindIcon       = "icon"       // <link rel=icon href>
)

// Ref is a sub-resource a page references.
type Ref struct {
	URL  *url.URL
	Kind string
	// CSS is set when the reference is in CSS — a url() or an @import, in
	// a stylesheet, a <style> block or a style attribute — rather than in
	// the HTML's own markup.
	CSS bool
}

// ExtractRefs returns the images, scripts, stylesheets and icons an HTML
// document references, and what the CSS in its <style> blocks and style
// attributes references (see ExtractCSSRefs), resolved against base (or the
// document's own <base href>), in document order, without duplicates, at
// most max of them (0 means no limit). Only http and https references are
// returned: data:, javascript: and other schemes fetch nothing over the
// network. The input is untrusted: malformed HTML yields whatever
// references can be recognised, never an error.
func ExtractRefs(base *url.URL, doc []byte, max int) []Ref {
	return extractRefs(base, doc, max, true)
}

// extractRefs is ExtractRefs, leaving out inline CSS unless css is set.
func extractRefs(base *url.URL, doc []byte, max int, css bool) []Ref {
	z := html.NewTokenizer(bytes.NewReader(doc))
	var refs []Ref
	seen := map[string]bool{}
	baseSet := false
	full := func() bool { return max > 0 && len(refs) >= max }
	addURL := func(u *url.URL, kind string, fromCSS bool) {
		if k := u.String(); !seen[k] && !full() {
			seen[k] = true
			refs = append(refs, Ref{URL: u, Kind: kind, CSS: fromCSS})
		}
	}
	add := func(raw, kind string) {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			return
		}
		u, err := base.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return
		}
		u.Fragment, u.RawFragment = "", ""
		addURL(u, kind, false)
	}
	addCSS := func(text []byte, decls bool) {
		scanCSS(text, decls, func(raw string, isImport bool) bool {
			if u := resolveCSSURL(base, raw); u != nil {
				kind := KindCSSURL
				if isImport {
					kind = KindStylesheet
				}
				addURL(u, kind, true)
			}
			return !full()
		})
	}
	inStyle := false // the previous token was a <style> start tag
	for !full() {
		tt := z.Next()
		if tt == html.ErrorToken { // io.EOF: a bytes.Reader fails no other way
			break
		}
		if inStyle {
			// The tokenizer hands a <style> element's content over raw,
			// as one text token.
			inStyle = false
			if tt == html.TextToken && css {
				addCSS(z.Text(), false)
				continue
			}
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		if string(name) == "style" {
			inStyle = true
		}
		if !hasAttr {
			continue
		}
		attrs := map[string]string{}
		for {
			k, v, more := z.TagAttr()
			key := string(k)
			if _, dup := attrs[key]; !dup { // HTML: the first of duplicate attributes wins
				attrs[key] = string(v)
			}
			if !more {
				break
			}
		}
		switch string(name) {
		case "base":
			// Only the first <base href> counts.
			if h, ok := attrs["href"]; ok && !baseSet {
				baseSet = true
				if u, err := base.Parse(strings.TrimSpace(h)); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
					base = u
				}
			}
		case "img":
			add(attrs["src"], KindImage)
		case "script":
			add(attrs["src"], KindScript)
		case "link":
			switch rel := relTokens(attrs["rel"]); {
			case rel["stylesheet"] && !rel["alternate"]:
				add(attrs["href"], KindStylesheet)
			case rel["icon"]:
				add(attrs["href"], KindIcon)
			}
		}
		if st, ok := attrs["style"]; ok && css {
			addCSS([]byte(st), true)
		}
	}
	return refs
}

// relTokens splits a rel attribute into its space-separated, case-insensitive
// keywords.
func relTokens(rel string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(strings.ToLower(rel)) {
		m[f] = true
	}
	return m
}
