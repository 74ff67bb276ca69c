package testbed

import (
	"fmt"
	"strings"
)

// Paths of the twins' stylesheets (TwinOptions.CSSImages).
const (
	TwinMainCSS     = "/css/main.css"
	TwinImportedCSS = "/css/more/imported.css"
)

// TwinCSSImage is the path of background image i (TwinOptions.CSSImages).
func TwinCSSImage(i int) string { return fmt.Sprintf("/css/img/%d.png", i) }

// twinCSS is the CSS side of a twin page with n background images. Image i
// is referenced from one of four places, in turn: the linked stylesheet
// main.css, the stylesheet imported.css that main.css @imports (in another
// directory, so relative URLs differ), the page's own <style> block, and a
// style attribute. Each place also holds what a client must not fetch: a
// url() in a comment, a data: URI, a fragment-only url(), a reference to an
// image already referenced elsewhere (fetched once), an @import back to
// main.css (a cycle) and an @import after a rule (which CSS ignores).
type twinCSS struct {
	main, imported []byte
	head, body     string // HTML for the page's <head> and <body>
}

func newTwinCSS(n int) *twinCSS {
	if n <= 0 {
		return nil
	}
	var main, imp, block, attrs strings.Builder
	main.WriteString("@charset \"utf-8\";\n/* url(img/commented.png) is not a reference, nor is @import \"commented.css\"; */\n")
	main.WriteString("@import url(\"more/imported.css\") screen;\n")
	main.WriteString(".blank { background: url(data:image/gif;base64,R0lGODlhAQABAAAAACw=) }\n")
	main.WriteString(".blur { filter: URL(#blur) }\n")
	imp.WriteString("@import \"../main.css\"; /* a cycle */\n")
	for i := 0; i < n; i++ {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&main, ".m%d { background: #fff url(img/%d.png) no-repeat }\n", i, i)
			fmt.Fprintf(&main, ".m%d:hover { background-image: url( 'img/%d.png#hover' ) }\n", i, i)
		case 1:
			fmt.Fprintf(&imp, ".i%d { background-image: url('../img/%d.png') }\n", i, i)
		case 2:
			fmt.Fprintf(&block, ".b%d { background: url(\"/css/img/%d.png\") }\n", i, i)
		case 3:
			fmt.Fprintf(&attrs, "<div style=\"background-image: url(&quot;css/img/%d.png&quot;)\"></div>\n", i)
		}
	}
	// Referenced again from the imported sheet: fetched once.
	fmt.Fprintf(&imp, ".again { background: url(/css/img/0.png) }\n")
	imp.WriteString("@import \"ignored.css\"; /* after a rule: ignored */\n")
	head := fmt.Sprintf("<link rel=\"stylesheet\" href=\"%s\">\n<style>\n/* url(/css/img/commented.png) */\n%s</style>\n", TwinMainCSS, block.String())
	return &twinCSS{main: []byte(main.String()), imported: []byte(imp.String()), head: head, body: attrs.String()}
}

// stylesheet returns the stylesheet at path, if there is one.
func (c *twinCSS) stylesheet(path string) ([]byte, bool) {
	switch {
	case c == nil:
		return nil, false
	case path == TwinMainCSS:
		return c.main, true
	case path == TwinImportedCSS:
		return c.imported, true
	}
	return nil, false
}

// StylesheetBytes is the size of the twins' two stylesheets together (0
// without CSSImages).
func (t *Twins) StylesheetBytes() int {
	if t.css == nil {
		return 0
	}
	return len(t.css.main) + len(t.css.imported)
}

// LoadRequests is how many requests one load of the page makes when a
// client fetches everything the page references, CSS included (and follows
// no redirect): the page, its Objects, and with CSSImages the two
// stylesheets and the images.
func (t *Twins) LoadRequests() int {
	n := 1 + t.Objects
	if t.css != nil {
		n += 2 + t.CSSImages
	}
	return n
}

// LoadBytes is how many body bytes such a load receives.
func (t *Twins) LoadBytes() int {
	return len(t.page) + (t.Objects+t.CSSImages)*len(t.object) + t.StylesheetBytes()
}
