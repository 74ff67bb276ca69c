package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Zeek writes its logs either as TSV, with "#separator", "#fields" and
// "#types" header lines, "-" for an unset field and "(empty)" for an empty
// one, or as JSON, one object per line with the same field names ("uid",
// "id.orig_h", …). conn.log has a line per connection; ssl.log a line per
// TLS handshake, with the server_name (SNI) the client sent. ZeekReader
// streams conn.log, keeping TCP connections to a chosen responder port, and
// names them from an ssl.log read first into a bounded map by uid.

// zeekRow is one log line's fields by name, whichever encoding it came in.
type zeekRow func(name string) (string, bool)

// zeekLines reads a Zeek log line by line, TSV or JSON, detected from its
// first line.
type zeekLines struct {
	sc     *bufio.Scanner
	line   int64
	stats  *Stats
	json   bool
	sniffd bool
	sep    string
	unset  string
	empty  string
	fields map[string]int
	tsv    []string
	obj    map[string]json.RawMessage
}

func newZeekLines(r io.Reader, st *Stats) *zeekLines {
	return &zeekLines{sc: newLineScanner(r), stats: st, sep: "\t", unset: "-", empty: "(empty)"}
}

// next returns the next data line, or io.EOF.
func (z *zeekLines) next() (zeekRow, error) {
	for {
		b, err := nextLine(z.sc, &z.line, z.stats)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if !z.sniffd {
			z.sniffd = true
			z.json = b[0] == '{'
		}
		if z.json {
			z.obj = nil
			if err := json.Unmarshal(b, &z.obj); err != nil {
				z.stats.malformed(z.line, err)
				continue
			}
			return z.jsonField, nil
		}
		s := string(b)
		if strings.HasPrefix(s, "#") {
			if err := z.header(s); err != nil {
				z.stats.malformed(z.line, err)
			}
			continue
		}
		if z.fields == nil {
			return nil, fmt.Errorf("replay: zeek: line %d: data before the #fields header", z.line)
		}
		z.tsv = strings.Split(s, z.sep)
		return z.tsvField, nil
	}
}

func (z *zeekLines) header(s string) error {
	if v, ok := strings.CutPrefix(s, "#separator "); ok {
		// Zeek writes the separator escaped: "#separator \x09".
		sep, err := unescapeZeek(v)
		if err != nil || sep == "" {
			return fmt.Errorf("bad #separator %q", v)
		}
		z.sep = sep
		return nil
	}
	name, val, _ := strings.Cut(s[1:], z.sep)
	switch name {
	case "unset_field":
		z.unset = val
	case "empty_field":
		z.empty = val
	case "fields":
		z.fields = make(map[string]int)
		for i, f := range strings.Split(val, z.sep) {
			z.fields[f] = i
		}
	}
	return nil
}

func unescapeZeek(s string) (string, error) {
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			n, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				return "", err
			}
			out.WriteByte(byte(n))
			i += 3
			continue
		}
		out.WriteByte(s[i])
	}
	return out.String(), nil
}

func (z *zeekLines) tsvField(name string) (string, bool) {
	i, ok := z.fields[name]
	if !ok || i >= len(z.tsv) {
		return "", false
	}
	v := z.tsv[i]
	if v == z.unset {
		return "", false
	}
	if v == z.empty {
		return "", true
	}
	return v, true
}

func (z *zeekLines) jsonField(name string) (string, bool) {
	raw, ok := z.obj[name]
	if !ok || string(raw) == "null" {
		return "", false
	}
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	}
	return string(raw), true
}

// ZeekReader reads a Zeek conn.log, naming flows from an ssl.log.
// Zeek's connections are two-way: orig is the client, resp the server.
// Bytes are IP-level (orig_ip_bytes, resp_ip_bytes) when the log has them,
// as nfdump's are, else payload bytes (orig_bytes, resp_bytes).
type ZeekReader struct {
	conn  *zeekLines
	opt   Options
	sni   map[string]string
	stats Stats
}

// NewZeekReader reads opt.ZeekSSL, if set, into the uid→SNI map and
// returns a reader of the conn.log r.
func NewZeekReader(r io.Reader, opt Options) (*ZeekReader, error) {
	z := &ZeekReader{opt: opt}
	z.conn = newZeekLines(r, &z.stats)
	if opt.ZeekSSL != nil {
		if err := z.readSSL(opt.ZeekSSL); err != nil {
			return nil, err
		}
	}
	return z, nil
}

func (z *ZeekReader) readSSL(r io.Reader) error {
	max := z.opt.MaxSNI
	if max <= 0 {
		max = DefaultMaxSNI
	}
	var st Stats
	lines := newZeekLines(r, &st)
	z.sni = make(map[string]string)
	for {
		row, err := lines.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("replay: ssl.log: %w", err)
		}
		uid, ok1 := row("uid")
		name, ok2 := row("server_name")
		if !ok1 || !ok2 || uid == "" || name == "" {
			continue
		}
		if _, ok := z.sni[uid]; ok {
			continue
		}
		if len(z.sni) >= max {
			z.stats.SNIDropped++
			continue
		}
		z.sni[uid] = strings.ToLower(strings.TrimSuffix(name, "."))
	}
	z.stats.SNIEntries = int64(len(z.sni))
	// The ssl.log's own malformed lines are the trace's too.
	z.stats.Malformed += st.Malformed
	if z.stats.FirstError == "" && st.FirstError != "" {
		z.stats.FirstError = "ssl.log: " + st.FirstError
	}
	return nil
}

// Stats reports what has been read so far.
func (z *ZeekReader) Stats() Stats { return z.stats }

// Next returns the next kept flow.
func (z *ZeekReader) Next() (Flow, error) {
	for {
		row, err := z.conn.next()
		if err != nil {
			return Flow{}, err
		}
		f, tcp, err := z.parse(row)
		if err != nil {
			z.stats.malformed(z.conn.line, err)
			continue
		}
		z.stats.Read++
		if !tcp || !z.opt.keeps(f.Port) {
			continue
		}
		z.stats.kept(f)
		return f, nil
	}
}

func (z *ZeekReader) parse(row zeekRow) (Flow, bool, error) {
	var f Flow
	ts, ok := row("ts")
	if !ok {
		return f, false, errors.New("no ts")
	}
	var err error
	if f.Start, err = zeekTime(ts); err != nil {
		return f, false, err
	}
	if d, ok := row("duration"); ok && d != "" {
		secs, err := strconv.ParseFloat(d, 64)
		if err != nil || secs < 0 || secs > 1e9 || math.IsNaN(secs) {
			return f, false, fmt.Errorf("bad duration %q", d)
		}
		f.Duration = time.Duration(secs * float64(time.Second))
	}
	for _, a := range []struct {
		name string
		dst  *netip.Addr
	}{{"id.orig_h", &f.Client}, {"id.resp_h", &f.Server}} {
		s, _ := row(a.name)
		if *a.dst, err = netip.ParseAddr(s); err != nil {
			return f, false, fmt.Errorf("%s: %w", a.name, err)
		}
	}
	p, _ := row("id.resp_p")
	if f.Port, err = parsePort(p); err != nil {
		return f, false, fmt.Errorf("id.resp_p: %w", err)
	}
	for _, c := range []struct {
		names []string
		dst   *uint64
	}{
		{[]string{"orig_ip_bytes", "orig_bytes"}, &f.BytesOut},
		{[]string{"resp_ip_bytes", "resp_bytes"}, &f.BytesIn},
		{[]string{"orig_pkts"}, &f.PacketsOut},
		{[]string{"resp_pkts"}, &f.PacketsIn},
	} {
		for _, n := range c.names {
			if s, ok := row(n); ok {
				if *c.dst, err = parseCount(s); err != nil {
					return f, false, fmt.Errorf("%s: %w", n, err)
				}
				break
			}
		}
	}
	proto, _ := row("proto")
	if uid, ok := row("uid"); ok && z.sni != nil {
		f.ServerName = z.sni[uid]
	}
	return f, proto == "tcp", nil
}

// zeekTime parses Zeek's ts: seconds since the epoch with a fraction, or
// what Zeek's JSON writer is set to (LogAscii::json_timestamps):
// JSON::TS_ISO8601, or JSON::TS_MILLIS (and TS_MILLIS_UNSIGNED), whole
// milliseconds since the epoch, told from seconds by size: 10^11 seconds
// is the year 5138, 10^11 milliseconds 1973.
func zeekTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 1e11 {
		if ms > 1e14 {
			return time.Time{}, fmt.Errorf("bad ts %q", s)
		}
		return time.UnixMilli(ms).UTC(), nil
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if secs < 0 || secs > 1e11 || math.IsNaN(secs) {
			return time.Time{}, fmt.Errorf("bad ts %q", s)
		}
		whole, frac := math.Modf(secs)
		return time.Unix(int64(whole), int64(math.Round(frac*1e6))*1e3).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad ts %q", s)
	}
	return t.UTC(), nil
}
