package pkie

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The docs are read on GitHub and in a checkout, so a relative link must
// name a file that exists and, where it has a fragment, a heading that
// GitHub gives that anchor. Links to other sites are not fetched: tests
// never leave the machine.
var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	htmlLink   = regexp.MustCompile(`(?i)<(?:img|a)\s[^>]*(?:src|href)="([^"]+)"`)
	inlineCode = regexp.MustCompile("`[^`]*`")
)

func TestDocLinks(t *testing.T) {
	var files []string
	files = append(files, "README.md")
	err := filepath.WalkDir("docs", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a, err := headingAnchors(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		anchors[path] = a
		return a
	}
	checked := 0
	for _, file := range files {
		links, err := relativeLinks(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			checked++
			target, frag, _ := strings.Cut(l.target, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				st, err := os.Stat(path)
				if err != nil {
					t.Errorf("%s:%d: link to %s: no such file", file, l.line, l.target)
					continue
				}
				if st.IsDir() {
					if frag != "" {
						t.Errorf("%s:%d: link to %s: a fragment on a directory", file, l.line, l.target)
					}
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchorsOf(path)[frag] {
				t.Errorf("%s:%d: link to %s: %s has no heading with anchor #%s", file, l.line, l.target, path, frag)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links found in README.md and docs/: is the link pattern still right?", checked)
	}
}

type docLink struct {
	target string
	line   int
}

// relativeLinks returns the links in a Markdown file that point inside the
// repository, skipping fenced code blocks and inline code.
func relativeLinks(path string) ([]docLink, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var links []docLink
	fence := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		line = inlineCode.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range htmlLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, tgt := range targets {
			if strings.Contains(tgt, "://") || strings.HasPrefix(tgt, "mailto:") {
				continue
			}
			links = append(links, docLink{target: tgt, line: n})
		}
	}
	return links, sc.Err()
}

// headingAnchors returns the anchors GitHub gives a Markdown file's
// headings: lower case, punctuation other than '-' and '_' dropped, spaces
// as '-', and "-1", "-2" … after a repeated anchor.
func headingAnchors(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	anchors := map[string]bool{}
	fence := ""
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := githubSlug(text)
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors, nil
}

func githubSlug(heading string) string {
	// Links in a heading count by their text; code spans by their content.
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var sb strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			sb.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func TestGithubSlug(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"The client–server deployment", "the-clientserver-deployment"},
		{"Request schedules", "request-schedules"},
		{"Flow traces (JSON lines)", "flow-traces-json-lines"},
		{"`pkie verify`: one chain", "pkie-verify-one-chain"},
		{"Notary bundles, version 1", "notary-bundles-version-1"},
		{"A [link](x.md) in it", "a-link-in-it"},
	} {
		if got := githubSlug(tc.in); got != tc.want {
			t.Errorf("githubSlug(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
