package gen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// TraceWriter writes flows as a trace file. Close ends the file (some
// formats have a trailer) and flushes it; it does not close the
// underlying writers.
type TraceWriter interface {
	Write(f replay.Flow) error
	Close() error
}

// NewWriter returns a writer of format: replay.FormatJSONL (pkie's JSON
// lines), replay.FormatNfdump (the CSV of nfdump 1.7's -o csv),
// replay.FormatZeek (a conn.log, with an ssl.log to ssl; ssl may be nil
// for a conn.log alone), or replay.FormatPCAP and FormatPCAPNG (a packet
// capture, pcap or pcapng, of IPv4 flows given in order of start, whose
// ClientHellos are captured whole and other packets to their headers:
// docs/measurement/replay.md, "The packet capture", says what it carries).
func NewWriter(format string, w, ssl io.Writer) (TraceWriter, error) {
	switch format {
	case replay.FormatJSONL:
		return jsonlWriter{replay.NewJSONLWriter(w)}, nil
	case replay.FormatNfdump:
		return newNfdumpWriter(w), nil
	case replay.FormatZeek:
		return newZeekWriter(w, ssl), nil
	case replay.FormatPCAP, FormatPCAPNG:
		return newPCAPWriter(w, format == FormatPCAPNG)
	}
	return nil, fmt.Errorf("gen: cannot write format %q (want jsonl, nfdump, zeek, pcap or pcapng)", format)
}

type jsonlWriter struct{ *replay.JSONLWriter }

func (w jsonlWriter) Close() error { return w.Flush() }

// clientPort is an ephemeral port for the n'th flow: traces have one, a
// Flow does not.
func clientPort(n uint64, f *replay.Flow) uint16 {
	c := f.Client.As16()
	h := mix(n ^ uint64(f.Start.UnixNano()) ^ uint64(c[13])<<40 ^ uint64(c[14])<<48 ^ uint64(c[15])<<56)
	return uint16(32768 + h%28232) // Linux's default ip_local_port_range
}

// nfdumpHeader is nfdump 1.7's -o csv header line, as nfdump 1.7.1 prints
// it.
const nfdumpHeader = "ts,te,td,sa,da,sp,dp,pr,flg,fwd,stos,ipkt,ibyt,opkt,obyt,in,out,sas,das,smk,dmk,dtos,dir,nh,nhb,svln,dvln,ismc,odmc,idmc,osmc,mpls1,mpls2,mpls3,mpls4,mpls5,mpls6,mpls7,mpls8,mpls9,mpls10,cl,sl,al,ra,eng,exid,tr"

// nfdumpWriter writes what `TZ=UTC nfdump -b -o csv` prints of
// bidirectional flows (nfpcapd, or NSEL): one record a connection, the
// client's packets in ipkt/ibyt and the server's in opkt/obyt. nfdump
// prints ts and te to the second and td to the millisecond, so a flow's
// start loses its fraction of a second; the duration does not.
type nfdumpWriter struct {
	w                  *bufio.Writer
	n                  uint64
	first, last        time.Time
	flows, bytes, pkts uint64
	buf                []byte
}

func newNfdumpWriter(w io.Writer) *nfdumpWriter {
	bw := bufio.NewWriter(w)
	bw.WriteString(nfdumpHeader + "\n")
	return &nfdumpWriter{w: bw}
}

const nfdumpTime = "2006-01-02 15:04:05"

func (w *nfdumpWriter) Write(f replay.Flow) error {
	w.n++
	start, end := f.Start.UTC(), f.Start.Add(f.Duration).UTC()
	if w.flows == 0 || start.Before(w.first) {
		w.first = start
	}
	if end.After(w.last) {
		w.last = end
	}
	w.flows++
	w.bytes += f.BytesOut + f.BytesIn
	w.pkts += f.PacketsOut + f.PacketsIn
	flags := "...AP.SF"
	if f.PacketsIn == 0 {
		flags = "......S."
	}
	b := w.buf[:0]
	b = start.AppendFormat(b, nfdumpTime)
	b = append(b, ',')
	b = end.AppendFormat(b, nfdumpTime)
	b = append(b, ',')
	b = strconv.AppendFloat(b, f.Duration.Seconds(), 'f', 3, 64)
	b = append(b, ',')
	b = f.Client.AppendTo(b)
	b = append(b, ',')
	b = f.Server.AppendTo(b)
	b = fmt.Appendf(b, ",%d,%d,TCP,%s,0,0,%d,%d,%d,%d", clientPort(w.n, &f), f.Port, flags,
		f.PacketsOut, f.BytesOut, f.PacketsIn, f.BytesIn)
	b = append(b, ",0,0,0,0,0,0,0,0,0.0.0.0,0.0.0.0,0,0,00:00:00:00:00:00,00:00:00:00:00:00,00:00:00:00:00:00,00:00:00:00:00:00,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,0-0-0,    0.000,    0.000,    0.000,0.0.0.0,0/0,0,"...)
	b = end.AppendFormat(b, "2006-01-02 15:04:05.000")
	b = append(b, '\n')
	w.buf = b
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("gen: writing nfdump CSV: %w", err)
	}
	return nil
}

// Close writes nfdump's summary block.
func (w *nfdumpWriter) Close() error {
	secs := w.last.Sub(w.first).Seconds()
	var bps, pps, bpp uint64
	if secs > 0 {
		bps, pps = uint64(float64(w.bytes)*8/secs), uint64(float64(w.pkts)/secs)
	}
	if w.pkts > 0 {
		bpp = w.bytes / w.pkts
	}
	fmt.Fprintf(w.w, "Summary\nflows,bytes,packets,avg_bps,avg_pps,avg_bpp\n%d,%d,%d,%d,%d,%d\n", w.flows, w.bytes, w.pkts, bps, pps, bpp)
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("gen: writing nfdump CSV: %w", err)
	}
	return nil
}

// The published field lists of Zeek's conn.log and ssl.log, as Zeek's
// ASCII writer heads them.
const (
	zeekConnFields = "ts\tuid\tid.orig_h\tid.orig_p\tid.resp_h\tid.resp_p\tproto\tservice\tduration\torig_bytes\tresp_bytes\tconn_state\tlocal_orig\tlocal_resp\tmissed_bytes\thistory\torig_pkts\torig_ip_bytes\tresp_pkts\tresp_ip_bytes\ttunnel_parents"
	zeekConnTypes  = "time\tstring\taddr\tport\taddr\tport\tenum\tstring\tinterval\tcount\tcount\tstring\tbool\tbool\tcount\tstring\tcount\tcount\tcount\tcount\tset[string]"
	zeekSSLFields  = "ts\tuid\tid.orig_h\tid.orig_p\tid.resp_h\tid.resp_p\tversion\tcipher\tcurve\tserver_name\tresumed\tlast_alert\tnext_protocol\testablished\tssl_history\tcert_chain_fps\tclient_cert_chain_fps\tsni_matches_cert"
	zeekSSLTypes   = "time\tstring\taddr\tport\taddr\tport\tstring\tstring\tstring\tstring\tbool\tstring\tstring\tbool\tstring\tvector[string]\tvector[string]\tbool"
	zeekOpenTime   = "2006-01-02-15-04-05"
)

// zeekWriter writes a conn.log and an ssl.log in Zeek's TSV. A connection
// that was never answered has no handshake, so no ssl.log line: its server
// name is lost, as it would be in Zeek's own logs. Bytes are IP bytes
// (orig_ip_bytes, resp_ip_bytes), which the reader prefers; the payload
// counts (orig_bytes, resp_bytes) leave out 52 bytes of headers a packet.
type zeekWriter struct {
	conn, ssl *bufio.Writer
	n         uint64
	header    bool
	last      time.Time
	buf       []byte
}

func newZeekWriter(conn, ssl io.Writer) *zeekWriter {
	z := &zeekWriter{conn: bufio.NewWriter(conn)}
	if ssl != nil {
		z.ssl = bufio.NewWriter(ssl)
	}
	return z
}

func zeekHead(w *bufio.Writer, path, fields, types string, open time.Time) {
	fmt.Fprintf(w, "#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n#unset_field\t-\n#path\t%s\n#open\t%s\n#fields\t%s\n#types\t%s\n",
		path, open.UTC().Format(zeekOpenTime), fields, types)
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// zeekUID makes a connection's uid the way Zeek shapes them: "C" and
// base-62 digits of a random number.
func zeekUID(b []byte, x uint64) []byte {
	b = append(b, 'C')
	for i := 0; i < 17; i++ {
		b = append(b, base62[x%62])
		x = x/62 ^ mix(x+uint64(i))<<20
	}
	return b
}

func appendZeekTime(b []byte, t time.Time) []byte {
	return fmt.Appendf(b, "%d.%06d", t.Unix(), t.Nanosecond()/1000)
}

func (z *zeekWriter) Write(f replay.Flow) error {
	if !z.header {
		z.header = true
		zeekHead(z.conn, "conn", zeekConnFields, zeekConnTypes, f.Start)
		if z.ssl != nil {
			zeekHead(z.ssl, "ssl", zeekSSLFields, zeekSSLTypes, f.Start)
		}
	}
	z.n++
	if f.Start.After(z.last) {
		z.last = f.Start
	}
	port := clientPort(z.n, &f)
	uid := zeekUID(nil, mix(z.n^uint64(f.Start.UnixNano())^uint64(port)<<32))
	answered := f.PacketsIn > 0
	service, state, history := "ssl", "SF", "ShADadFf"
	if !answered {
		service, state, history = "-", "S0", "S"
	}
	payload := func(bytes, pkts uint64) uint64 {
		if h := pkts * 52; bytes > h {
			return bytes - h
		}
		return 0
	}
	b := z.buf[:0]
	b = appendZeekTime(b, f.Start)
	b = append(b, '\t')
	b = append(b, uid...)
	b = append(b, '\t')
	b = f.Client.AppendTo(b)
	b = fmt.Appendf(b, "\t%d\t", port)
	b = f.Server.AppendTo(b)
	b = fmt.Appendf(b, "\t%d\ttcp\t%s\t%.6f\t%d\t%d\t%s\tT\tF\t0\t%s\t%d\t%d\t%d\t%d\t-\n",
		f.Port, service, f.Duration.Seconds(), payload(f.BytesOut, f.PacketsOut), payload(f.BytesIn, f.PacketsIn),
		state, history, f.PacketsOut, f.BytesOut, f.PacketsIn, f.BytesIn)
	z.buf = b
	if _, err := z.conn.Write(b); err != nil {
		return fmt.Errorf("gen: writing conn.log: %w", err)
	}
	if z.ssl == nil || !answered || f.ServerName == "" {
		return nil
	}
	b = b[:0]
	b = appendZeekTime(b, f.Start)
	b = append(b, '\t')
	b = append(b, uid...)
	b = append(b, '\t')
	b = f.Client.AppendTo(b)
	b = fmt.Appendf(b, "\t%d\t", port)
	b = f.Server.AppendTo(b)
	b = fmt.Appendf(b, "\t%d\tTLSv13\tTLS_AES_128_GCM_SHA256\tx25519\t%s\tF\t-\t-\tT\tCsiI\t(empty)\t(empty)\tT\n", f.Port, zeekEscape(f.ServerName))
	z.buf = b
	if _, err := z.ssl.Write(b); err != nil {
		return fmt.Errorf("gen: writing ssl.log: %w", err)
	}
	return nil
}

// Close writes the logs' #close lines and flushes them.
func (z *zeekWriter) Close() error {
	var errs []error
	for _, w := range []*bufio.Writer{z.conn, z.ssl} {
		if w == nil {
			continue
		}
		if z.header {
			fmt.Fprintf(w, "#close\t%s\n", z.last.UTC().Format(zeekOpenTime))
		}
		if err := w.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("gen: writing Zeek log: %w", err))
		}
	}
	return errors.Join(errs...)
}

// zeekEscape escapes what Zeek's ASCII writer escapes in a string: the
// separator, the backslash and bytes that are not printable ASCII, as
// \xNN; and a string that reads as the unset or empty marker.
func zeekEscape(s string) string {
	switch s {
	case "":
		return "(empty)"
	case "-", "(empty)":
		return fmt.Sprintf("\\x%02x%s", s[0], s[1:])
	}
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' || c < 0x20 || c >= 0x7f {
			if b == nil {
				b = append(b, s[:i]...)
			}
			b = fmt.Appendf(b, "\\x%02x", c)
			continue
		}
		if b != nil {
			b = append(b, c)
		}
	}
	if b == nil {
		return s
	}
	return string(b)
}
