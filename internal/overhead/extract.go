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
}

// ExtractRefs returns the images, scripts, stylesheets and icons an HTML
// document references, resolved against base (or the document's own <base
// href>), in document order, without duplicates, at most max of them (0
// means no limit). Only http and https references are returned: data:,
// javascript: and other schemes fetch nothing over the network. The input is
// untrusted: malformed HTML yields whatever references can be recognised,
// never an error.
func ExtractRefs(base *url.URL, doc []byte, max int) []Ref {
	z := html.NewTokenizer(bytes.NewReader(doc))
	var refs []Ref
	seen := map[string]bool{}
	baseSet := false
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
		k := u.String()
		if seen[k] {
			return
		}
		seen[k] = true
		refs = append(refs, Ref{URL: u, Kind: kind})
	}
	for max <= 0 || len(refs) < max {
		tt := z.Next()
		if tt == html.ErrorToken { // io.EOF: a bytes.Reader fails no other way
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
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
