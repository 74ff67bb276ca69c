package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Reader yields a trace's flows one at a time. Next returns io.EOF after the
// last flow; any other error ends the trace (a malformed record does not: it
// is counted in Stats and skipped).
type Reader interface {
	Next() (Flow, error)
	Stats() Stats
}

// Options select what a reader keeps. They are shared by every format.
type Options struct {
	// Ports are the server ports whose TCP flows are kept; none means 443.
	Ports []uint16
	// ZeekSSL, when set, is a Zeek ssl.log (TSV or JSON) whose server_name
	// values name the conn.log flows of the same uid.
	ZeekSSL io.Reader
	// MaxSNI bounds the uid→server-name map read from ZeekSSL; zero means
	// DefaultMaxSNI. Entries past the bound are dropped and counted, and
	// their flows stay unnamed.
	MaxSNI int
}

// DefaultMaxSNI is the default bound on the ssl.log map: about 100 MB of
// uids and names, far more than an hour of a campus network's TLS.
const DefaultMaxSNI = 1 << 20

// MaxLine bounds a text trace's line: a longer line is malformed, so a
// file without newlines cannot make a reader buffer it whole.
const MaxLine = 64 << 10

// keeps reports whether a TCP flow to port is wanted.
func (o Options) keeps(port uint16) bool {
	if len(o.Ports) == 0 {
		return port == 443
	}
	for _, p := range o.Ports {
		if p == port {
			return true
		}
	}
	return false
}

// Stats counts what a reader has seen so far.
type Stats struct {
	// Read is how many well-formed flow records the trace held, of any
	// protocol and port.
	Read int64 `json:"read"`
	// Kept is how many of them were TCP to a chosen port and returned.
	Kept int64 `json:"kept"`
	// Named is how many kept flows carried a server name.
	Named int64 `json:"named"`
	// Malformed is how many records could not be parsed and were skipped.
	Malformed int64 `json:"malformed"`
	// FirstError describes the first malformed record.
	FirstError string `json:"first_error,omitempty"`
	// SNIEntries and SNIDropped count the Zeek ssl.log map: names held,
	// and names dropped past Options.MaxSNI.
	SNIEntries int64 `json:"sni_entries,omitempty"`
	SNIDropped int64 `json:"sni_dropped,omitempty"`
	// Packets, Evicted and Late are a packet trace's: packets read, flows
	// returned early because too many were open at once, and packets of
	// connections already returned.
	Packets int64 `json:"packets,omitempty"`
	Evicted int64 `json:"evicted,omitempty"`
	Late    int64 `json:"late,omitempty"`
	// OtherLink, NonTCP and Truncated say why a packet trace's packets
	// made no flow, or less of one: packets of a link type the reader
	// does not decode (OtherLinkType names the first such type, as
	// "105 (802.11)"), packets that were not TCP over IPv4 or IPv6
	// (ARP, UDP, ICMP, other EtherTypes), and packets captured shorter
	// than they were on the wire (a snap length): those still count in
	// full when their IP and TCP headers were captured, and are also
	// Malformed when they were not.
	OtherLink     int64  `json:"other_link,omitempty"`
	OtherLinkType string `json:"other_link_type,omitempty"`
	NonTCP        int64  `json:"non_tcp,omitempty"`
	Truncated     int64  `json:"truncated,omitempty"`
}

func (s *Stats) malformed(line int64, err error) {
	s.Malformed++
	if s.FirstError == "" {
		s.FirstError = fmt.Sprintf("line %d: %v", line, err)
	}
}

func (s *Stats) kept(f Flow) {
	s.Kept++
	if f.ServerName != "" {
		s.Named++
	}
}

// Formats Open knows.
const (
	FormatAuto   = "auto"
	FormatJSONL  = "jsonl"
	FormatNfdump = "nfdump"
	FormatZeek   = "zeek"
	FormatPCAP   = "pcap"
)

// ErrUnknownFormat is returned by Open when auto-detection fails.
var ErrUnknownFormat = errors.New("replay: unrecognised trace format (want JSON lines, nfdump CSV, Zeek TSV or JSON, pcap, pcapng)")

// Open returns a reader of r in format (FormatAuto sniffs the first bytes).
func Open(r io.Reader, format string, opt Options) (Reader, error) {
	br := bufio.NewReaderSize(r, MaxLine)
	if format == "" || format == FormatAuto {
		head, _ := br.Peek(4096)
		format = Sniff(head)
		if format == "" {
			return nil, ErrUnknownFormat
		}
	}
	switch format {
	case FormatJSONL:
		return NewJSONLReader(br), nil
	case FormatNfdump:
		return NewNfdumpReader(br, opt), nil
	case FormatZeek:
		return NewZeekReader(br, opt)
	case FormatPCAP:
		p, err := OpenPCAP(br, opt)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	return nil, fmt.Errorf("replay: unknown format %q (want auto, jsonl, nfdump, zeek or pcap)", format)
}

// Sniff names the format of a trace from its first bytes, or returns "".
func Sniff(head []byte) string {
	if len(head) >= 4 {
		switch string(head[:4]) {
		case "\xa1\xb2\xc3\xd4", "\xd4\xc3\xb2\xa1", // pcap, µs
			"\xa1\xb2\x3c\x4d", "\x4d\x3c\xb2\xa1", // pcap, ns
			"\x0a\x0d\x0d\x0a": // pcapng section header block
			return FormatPCAP
		}
	}
	line, _, _ := bytes.Cut(head, []byte("\n"))
	line = bytes.TrimSpace(line)
	switch {
	case bytes.HasPrefix(line, []byte("#separator")):
		return FormatZeek
	case bytes.HasPrefix(line, []byte("{")):
		// Zeek's JSON logs carry a uid and dotted id fields; pkie's own
		// flows carry neither.
		if bytes.Contains(line, []byte(`"uid"`)) || bytes.Contains(line, []byte(`"id.orig_h"`)) {
			return FormatZeek
		}
		return FormatJSONL
	}
	fields := strings.Split(string(line), ",")
	if _, ok := nfdumpColumns(fields); ok || nfdumpQuiet(fields) {
		return FormatNfdump
	}
	return ""
}
