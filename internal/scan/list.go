package scan

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// Site is one entry of a site list: a domain and its popularity rank.
type Site struct {
	Rank   int
	Domain string
}

// LineError describes a site-list line that was skipped.
type LineError struct {
	Line   int    // 1-based line number
	Text   string // the line, cut to 80 bytes
	Reason string
}

func (e *LineError) Error() string {
	return fmt.Sprintf("line %d: %s: %q", e.Line, e.Reason, e.Text)
}

// maxListLine bounds one site-list line; a Tranco line is under 300 bytes.
const maxListLine = 4 << 10

// ListReader streams a site list: either Tranco/Alexa CSV ("rank,domain")
// or one domain per line, in any mix. Blank lines and lines starting with
// '#' are ignored. A line without a rank gets the rank after the previous
// entry's. Malformed lines are passed to OnMalformed and skipped: one bad
// line in a million must not stop a scan. Only one line is held at a time,
// so a list of any length is read in constant memory.
type ListReader struct {
	// OnMalformed, if set, is told about each skipped line.
	OnMalformed func(*LineError)
	// Limit, if positive, stops the list after that many sites.
	Limit int

	r        *bufio.Reader
	line     int
	lastRank int
	n        int
	bad      int
}

// NewListReader returns a ListReader reading r.
func NewListReader(r io.Reader) *ListReader {
	return &ListReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Malformed returns how many lines have been skipped so far.
func (l *ListReader) Malformed() int { return l.bad }

// Next returns the next site, or io.EOF after the last one (or after Limit
// sites). Any other error is a read error of the underlying reader.
func (l *ListReader) Next() (Site, error) {
	for {
		if l.Limit > 0 && l.n >= l.Limit {
			return Site{}, io.EOF
		}
		raw, tooLong, err := readLine(l.r, maxListLine)
		if err != nil && !(errors.Is(err, io.EOF) && len(raw) > 0) {
			return Site{}, err
		}
		l.line++
		if tooLong {
			l.reject(raw, fmt.Sprintf("line longer than %d bytes", maxListLine))
			continue
		}
		if l.line == 1 {
			raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")) // UTF-8 BOM
		}
		s, skip, reason := parseListLine(string(bytes.TrimSpace(raw)), l.lastRank)
		if skip {
			continue
		}
		if reason != "" {
			l.reject(raw, reason)
			continue
		}
		l.lastRank = s.Rank
		l.n++
		return s, nil
	}
}

func (l *ListReader) reject(raw []byte, reason string) {
	l.bad++
	if l.OnMalformed == nil {
		return
	}
	t := string(raw)
	if len(t) > 80 {
		t = t[:80] + "…"
	}
	l.OnMalformed(&LineError{Line: l.line, Text: t, Reason: reason})
}

// readLine reads one line without its terminator. A line longer than max is
// consumed to its end and reported as tooLong with its first max bytes.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(buf)+len(frag) > max+1 { // +1: the newline itself
			tooLong = true
			if len(buf) < max {
				buf = append(buf, frag[:max-len(buf)]...)
			}
		} else {
			buf = append(buf, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		if err != nil {
			return buf, tooLong, err
		}
		return buf, tooLong, nil
	}
}

// parseListLine parses one trimmed line. skip means a blank or comment line.
func parseListLine(s string, lastRank int) (site Site, skip bool, reason string) {
	if s == "" || s[0] == '#' {
		return Site{}, true, ""
	}
	rank := lastRank + 1
	domain := s
	if i := strings.IndexByte(s, ','); i >= 0 {
		rs, rest := strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
		if strings.IndexByte(rest, ',') >= 0 {
			return Site{}, false, "more than two comma-separated fields (want rank,domain)"
		}
		n, err := strconv.Atoi(rs)
		if err != nil || n < 1 {
			if rank == 1 && strings.EqualFold(rs, "rank") {
				return Site{}, true, "" // a CSV header line
			}
			return Site{}, false, fmt.Sprintf("rank %q is not a positive integer", rs)
		}
		rank, domain = n, rest
	} else if strings.ContainsAny(s, " \t") {
		return Site{}, false, "a domain contains no spaces (want rank,domain or one domain per line)"
	}
	d, err := NormalizeDomain(domain)
	if err != nil {
		return Site{}, false, err.Error()
	}
	return Site{Rank: rank, Domain: d}, false, ""
}

// NormalizeDomain lowercases a host name and checks that it is a DNS name
// (letters, digits, '-' and '_' in labels of 1 to 63 bytes, at most 253
// bytes) or an IP literal, returning it without a trailing dot.
func NormalizeDomain(d string) (string, error) {
	if d == "" {
		return "", errors.New("empty domain")
	}
	if a, err := netip.ParseAddr(d); err == nil {
		return a.String(), nil
	}
	d = strings.ToLower(strings.TrimSuffix(d, "."))
	if len(d) > 253 {
		return "", fmt.Errorf("domain is %d bytes long; a DNS name has at most 253", len(d))
	}
	if strings.Contains(d, "://") || strings.ContainsAny(d, "/:") {
		return "", fmt.Errorf("%q is not a bare domain (no scheme, port or path)", trunc(d, 60))
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" {
			return "", fmt.Errorf("domain %q has an empty label", trunc(d, 60))
		}
		if len(label) > 63 {
			return "", fmt.Errorf("domain %q has a label longer than 63 bytes", trunc(d, 60))
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("domain %q has a character %q not allowed in a DNS name", trunc(d, 60), c)
			}
		}
	}
	return d, nil
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// CountSites counts the sites a list holds (up to limit if positive),
// reading it once; the scanner uses it for its ETA.
func CountSites(r io.Reader, limit int) (int, error) {
	l := NewListReader(r)
	l.Limit = limit
	n := 0
	for {
		_, err := l.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}
