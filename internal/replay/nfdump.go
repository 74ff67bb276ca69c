package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// nfdump's CSV output (nfdump -r FILE -o csv) names its columns in a
// header line: nfdump 1.6 and 1.7 write the short names of the fmt:
// format (ts,te,td,sa,da,sp,dp,pr,flg,…,ipkt,ibyt,opkt,obyt,…) with times
// as "2006-01-02 15:04:05[.000]" in the local zone of the machine running
// nfdump, and append a "Summary" block. nfdump 1.7's -o csv-fast names them
// in long form (cnt,af,firstSeen,lastSeen,proto,srcAddr,srcPort,dstAddr,
// dstPort,…,packets,bytes) with times in milliseconds since the epoch and
// the protocol as a number. Columns are found by name, so either works.
// nfdump -q drops the header (and the summary): the -o csv layout is then
// assumed.
var nfdumpNames = map[string]string{
	"ts": "ts", "firstseen": "ts",
	"te": "te", "lastseen": "te",
	"td": "td", "duration": "td",
	"sa": "sa", "srcaddr": "sa",
	"da": "da", "dstaddr": "da",
	"sp": "sp", "srcport": "sp",
	"dp": "dp", "dstport": "dp",
	"pr": "pr", "proto": "pr",
	"ipkt": "ipkt", "packets": "ipkt", "inpackets": "ipkt",
	"ibyt": "ibyt", "bytes": "ibyt", "inbytes": "ibyt",
	"opkt": "opkt", "outpackets": "opkt",
	"obyt": "obyt", "outbytes": "obyt",
}

type nfdumpCols struct{ ts, te, td, sa, da, sp, dp, pr, ipkt, ibyt, opkt, obyt int }

// nfdumpColumns finds the columns of a header line; ok is false unless it
// has at least a start time, both addresses and ports, and the protocol.
func nfdumpColumns(header []string) (nfdumpCols, bool) {
	c := nfdumpCols{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}
	for i, h := range header {
		switch nfdumpNames[strings.ToLower(strings.TrimSpace(h))] {
		case "ts":
			c.ts = i
		case "te":
			c.te = i
		case "td":
			c.td = i
		case "sa":
			c.sa = i
		case "da":
			c.da = i
		case "sp":
			c.sp = i
		case "dp":
			c.dp = i
		case "pr":
			c.pr = i
		case "ipkt":
			c.ipkt = i
		case "ibyt":
			c.ibyt = i
		case "opkt":
			c.opkt = i
		case "obyt":
			c.obyt = i
		}
	}
	ok := c.ts >= 0 && c.sa >= 0 && c.da >= 0 && c.sp >= 0 && c.dp >= 0 && c.pr >= 0
	return c, ok
}

// nfdumpCSVLayout is where nfdump -o csv puts its columns (1.6 and 1.7
// alike): the layout of a headerless nfdump -q -o csv.
var nfdumpCSVLayout = nfdumpCols{ts: 0, te: 1, td: 2, sa: 3, da: 4, sp: 5, dp: 6, pr: 7, ipkt: 11, ibyt: 12, opkt: 13, obyt: 14}

// nfdumpQuiet reports whether a first line is a record of nfdump -q -o
// csv, which drops the header line: at least the columns up to obyt, a
// start time first and addresses where nfdump puts them.
func nfdumpQuiet(fields []string) bool {
	if len(fields) < 15 {
		return false
	}
	if _, err := time.Parse("2006-01-02 15:04:05.999999999", strings.TrimSpace(fields[0])); err != nil {
		return false
	}
	for _, i := range []int{3, 4} {
		if _, err := netip.ParseAddr(strings.TrimSpace(fields[i])); err != nil {
			return false
		}
	}
	return true
}

// NfdumpReader reads nfdump's CSV output. nfdump's flows are one-way: a
// record from sa:sp to da:dp is kept when it is TCP and dp is a chosen
// port, its ipkt/ibyt becoming the client's PacketsOut/BytesOut; the
// answer, a separate record from the server's port, is counted in Read but
// not kept. Bidirectional records (NSEL, or nfpcapd's -b) carry the answer
// in opkt/obyt, which become PacketsIn/BytesIn. Times without a zone are
// taken as UTC: run nfdump with TZ=UTC.
type NfdumpReader struct {
	sc     *bufio.Scanner
	opt    Options
	line   int64
	cols   nfdumpCols
	header bool
	done   bool
	stats  Stats
}

// NewNfdumpReader returns a reader of r.
func NewNfdumpReader(r io.Reader, opt Options) *NfdumpReader {
	return &NfdumpReader{sc: newLineScanner(r), opt: opt}
}

// Stats reports what has been read so far.
func (r *NfdumpReader) Stats() Stats { return r.stats }

// Next returns the next kept flow.
func (r *NfdumpReader) Next() (Flow, error) {
	for !r.done {
		b, err := nextLine(r.sc, &r.line, &r.stats)
		if err != nil {
			return Flow{}, err
		}
		line := strings.TrimSpace(string(b))
		if line == "" {
			continue
		}
		fields := strings.Split(line, ",")
		if !r.header {
			cols, ok := nfdumpColumns(fields)
			switch {
			case ok:
				r.cols, r.header = cols, true
				continue
			case nfdumpQuiet(fields):
				// No header: this line is the first record.
				r.cols, r.header = nfdumpCSVLayout, true
			default:
				return Flow{}, fmt.Errorf("replay: nfdump: line %d: neither an nfdump CSV header (ts,te,td,sa,da,sp,dp,pr,… or firstSeen,…,srcAddr,…) nor a record of nfdump -q -o csv", r.line)
			}
		}
		// nfdump ends its CSV with a summary of the whole query, and
		// sometimes a line of its own statistics; none of it is a flow.
		if strings.HasPrefix(line, "Summary") {
			r.done = true
			break
		}
		f, proto, err := r.parse(fields)
		if err != nil {
			r.stats.malformed(r.line, err)
			continue
		}
		r.stats.Read++
		if proto != 6 || !r.opt.keeps(f.Port) {
			continue
		}
		r.stats.kept(f)
		return f, nil
	}
	return Flow{}, io.EOF
}

func (r *NfdumpReader) parse(fields []string) (Flow, int, error) {
	c := r.cols
	get := func(i int) string {
		if i < 0 || i >= len(fields) {
			return ""
		}
		return strings.TrimSpace(fields[i])
	}
	var f Flow
	var err error
	if f.Start, err = nfdumpTime(get(c.ts)); err != nil {
		return f, 0, fmt.Errorf("ts: %w", err)
	}
	if s := get(c.td); s != "" {
		secs, err := strconv.ParseFloat(s, 64)
		if err != nil || secs < 0 || secs > 1e9 {
			return f, 0, fmt.Errorf("td: bad duration %q", s)
		}
		f.Duration = time.Duration(secs * float64(time.Second))
	} else if s := get(c.te); s != "" {
		end, err := nfdumpTime(s)
		if err != nil {
			return f, 0, fmt.Errorf("te: %w", err)
		}
		if end.Before(f.Start) {
			return f, 0, errors.New("te before ts")
		}
		f.Duration = end.Sub(f.Start)
	}
	if f.Client, err = netip.ParseAddr(get(c.sa)); err != nil {
		return f, 0, fmt.Errorf("sa: %w", err)
	}
	if f.Server, err = netip.ParseAddr(get(c.da)); err != nil {
		return f, 0, fmt.Errorf("da: %w", err)
	}
	if _, err = parsePort(get(c.sp)); err != nil {
		return f, 0, fmt.Errorf("sp: %w", err)
	}
	if f.Port, err = parsePort(get(c.dp)); err != nil {
		return f, 0, fmt.Errorf("dp: %w", err)
	}
	proto, err := nfdumpProto(get(c.pr))
	if err != nil {
		return f, 0, fmt.Errorf("pr: %w", err)
	}
	for _, n := range []struct {
		col int
		dst *uint64
	}{{c.ipkt, &f.PacketsOut}, {c.ibyt, &f.BytesOut}, {c.opkt, &f.PacketsIn}, {c.obyt, &f.BytesIn}} {
		if *n.dst, err = parseCount(get(n.col)); err != nil {
			return f, 0, err
		}
	}
	return f, proto, nil
}

// nfdumpTime parses "2006-01-02 15:04:05[.000]" (UTC) or milliseconds
// since the epoch.
func nfdumpTime(s string) (time.Time, error) {
	if s != "" && strings.Trim(s, "0123456789") == "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms > 1<<50 {
			return time.Time{}, fmt.Errorf("bad time %q", s)
		}
		return time.UnixMilli(ms).UTC(), nil
	}
	t, err := time.Parse("2006-01-02 15:04:05.999999999", s)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad time %q", s)
	}
	return t, nil
}

func nfdumpProto(s string) (int, error) {
	switch strings.ToUpper(s) {
	case "TCP":
		return 6, nil
	case "UDP":
		return 17, nil
	case "ICMP":
		return 1, nil
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		// Other protocols are named too (GRE, ESP, IPv6-ICMP…): not TCP.
		if s != "" && !strings.ContainsAny(s, " \t") {
			return 256, nil
		}
		return 0, fmt.Errorf("bad protocol %q", s)
	}
	return int(n), nil
}

func parsePort(s string) (uint16, error) {
	// nfdump prints ICMP type.code in the port column ("0.0", "3.1").
	if strings.Contains(s, ".") {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return uint16(n), nil
}

// parseCount parses a packet or byte count; nfdump's CSV prints them as
// plain integers, and an absent column counts nothing.
func parseCount(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad count %q", s)
	}
	return n, nil
}
