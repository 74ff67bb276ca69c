package replay

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// clientHello returns the first bytes crypto/tls sends as a client asking
// for serverName: its ClientHello record, taken off a net.Pipe.
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	c, s := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The handshake fails once s is closed; only its first flight
		// matters here.
		// Without a name, crypto/tls insists on InsecureSkipVerify.
		_ = tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""}).Handshake()
	}()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(s, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
	if _, err := io.ReadFull(s, body); err != nil {
		t.Fatal(err)
	}
	s.Close()
	c.Close()
	<-done
	return append(hdr, body...)
}

// traceWriter assembles a trace packet by packet.
type traceWriter struct {
	t   testing.TB
	lt  layers.LinkType
	out func(gopacket.CaptureInfo, []byte) error
}

func (w *traceWriter) send(ts time.Time, src, dst netip.AddrPort, flags string, seq, ack uint32, payload []byte) {
	w.t.Helper()
	tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), Seq: seq, Ack: ack, Window: 65535}
	for _, f := range flags {
		switch f {
		case 'S':
			tcp.SYN = true
		case 'A':
			tcp.ACK = true
		case 'F':
			tcp.FIN = true
		case 'R':
			tcp.RST = true
		case 'P':
			tcp.PSH = true
		}
	}
	var ls []gopacket.SerializableLayer
	var net gopacket.NetworkLayer
	eth := &layers.Ethernet{SrcMAC: net2mac(1), DstMAC: net2mac(2)}
	if src.Addr().Is4() {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		eth.EthernetType, net = layers.EthernetTypeIPv4, ip
		ls = append(ls, ip)
	} else {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		eth.EthernetType, net = layers.EthernetTypeIPv6, ip
		ls = append(ls, ip)
	}
	if w.lt == layers.LinkTypeEthernet {
		ls = append([]gopacket.SerializableLayer{eth}, ls...)
	}
	if err := tcp.SetNetworkLayerForChecksum(net); err != nil {
		w.t.Fatal(err)
	}
	ls = append(ls, tcp, gopacket.Payload(payload))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		w.t.Fatal(err)
	}
	b := buf.Bytes()
	if err := w.out(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(b), Length: len(b)}, b); err != nil {
		w.t.Fatal(err)
	}
}

func net2mac(b byte) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, b} }

// conn writes one TCP connection: handshake, the client's first bytes
// (in two segments, the second sent first, when split), a response of
// respLen bytes, and unless open, a FIN each way and the last ACK. It
// returns the flow a reader must make of it (IP bytes: 20-byte TCP
// headers behind 20-byte IPv4 or 40-byte IPv6 headers, plus data).
func (w *traceWriter) conn(t0 time.Time, c, s netip.AddrPort, first []byte, split, open bool, respLen int) Flow {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const cisn, sisn = 1000, 900000
	w.send(at(0), c, s, "S", cisn, 0, nil)
	w.send(at(10), s, c, "SA", sisn, cisn+1, nil)
	w.send(at(20), c, s, "A", cisn+1, sisn+1, nil)
	out, in := 2, 1
	if split {
		h := len(first) / 3
		w.send(at(21), c, s, "PA", cisn+1+uint32(h), sisn+1, first[h:])
		w.send(at(22), c, s, "PA", cisn+1, sisn+1, first[:h])
		out += 2
	} else {
		w.send(at(21), c, s, "PA", cisn+1, sisn+1, first)
		out++
	}
	cnext := uint32(cisn + 1 + len(first))
	w.send(at(30), s, c, "PA", sisn+1, cnext, make([]byte, respLen))
	in++
	snext := uint32(sisn + 1 + respLen)
	end := 30
	if !open {
		w.send(at(40), c, s, "FA", cnext, snext, nil)
		w.send(at(50), s, c, "FA", snext, cnext+1, nil)
		w.send(at(60), c, s, "A", cnext+1, snext+1, nil)
		out += 2
		in++
		end = 60
	}
	hdr := 20 + 20
	if c.Addr().Is6() {
		hdr = 20 + 40
	}
	return Flow{
		Start: t0, Duration: time.Duration(end) * time.Millisecond,
		Client: c.Addr(), Server: s.Addr(), Port: s.Port(),
		BytesOut: uint64(hdr*out + len(first)), BytesIn: uint64(hdr*in + respLen),
		PacketsOut: uint64(out), PacketsIn: uint64(in),
	}
}

// writeTrace writes the test's trace through out and returns the flows a
// reader with the default ports must return, by client.
func writeTrace(t testing.TB, lt layers.LinkType, out func(gopacket.CaptureInfo, []byte) error) map[netip.Addr]Flow {
	w := &traceWriter{t: t, lt: lt, out: out}
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	ap := netip.MustParseAddrPort
	want := map[netip.Addr]Flow{}
	add := func(f Flow, sni string) {
		f.ServerName = sni
		want[f.Client] = f
	}
	ha := clientHello(t, "a.example")
	add(w.conn(t0, ap("10.0.0.1:40001"), ap("192.0.2.1:443"), ha, false, false, 100), "a.example")
	// A retransmitted last ACK after the close: late, not a new flow.
	w.send(t0.Add(70*time.Millisecond), ap("10.0.0.1:40001"), ap("192.0.2.1:443"), "A", 1000+1+uint32(len(ha))+1, 900000+1+100+1, nil)
	add(w.conn(t0.Add(time.Second), ap("[2001:db8::1]:40002"), ap("[2001:db8::2]:443"), clientHello(t, "Mixed.Example.COM"), false, false, 2000), "mixed.example.com")
	add(w.conn(t0.Add(2*time.Second), ap("10.0.0.2:40003"), ap("192.0.2.3:443"), clientHello(t, "split.example"), true, false, 50), "split.example")
	// Another port: skipped with the default ports.
	w.conn(t0.Add(3*time.Second), ap("10.0.0.3:40004"), ap("192.0.2.4:8443"), clientHello(t, "other.example"), false, false, 10)
	// No TLS on 443, and never closed: returned at the end of the trace.
	add(w.conn(t0.Add(4*time.Second), ap("10.0.0.4:40005"), ap("192.0.2.5:443"), []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false, true, 300), "")
	return want
}

// makeTrace writes the test's trace as a pcap or pcapng file of the given
// link type.
func makeTrace(t testing.TB, ng bool, lt layers.LinkType) ([]byte, map[netip.Addr]Flow) {
	var b bytes.Buffer
	if ng {
		w, err := pcapgo.NewNgWriter(&b, lt)
		if err != nil {
			t.Fatal(err)
		}
		want := writeTrace(t, lt, w.WritePacket)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes(), want
	}
	w := pcapgo.NewWriterNanos(&b)
	if err := w.WriteFileHeader(65535, lt); err != nil {
		t.Fatal(err)
	}
	want := writeTrace(t, lt, w.WritePacket)
	return b.Bytes(), want
}

func readPCAP(t testing.TB, r io.Reader, opt Options) ([]Flow, pcapStats) {
	t.Helper()
	pr, err := OpenPCAP(r, opt)
	if err != nil {
		t.Fatal(err)
	}
	var got []Flow
	for {
		f, err := pr.Next()
		if errors.Is(err, io.EOF) {
			return got, pr.packetStats()
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
}

func TestOpenPCAP(t *testing.T) {
	for _, tc := range []struct {
		name string
		ng   bool
		lt   layers.LinkType
	}{
		{"pcap ethernet", false, layers.LinkTypeEthernet},
		{"pcap raw IP", false, layers.LinkTypeRaw},
		{"pcapng ethernet", true, layers.LinkTypeEthernet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trace, want := makeTrace(t, tc.ng, tc.lt)
			got, st := readPCAP(t, bytes.NewReader(trace), Options{})
			if len(got) != len(want) {
				t.Fatalf("got %d flows, want %d: %+v", len(got), len(want), got)
			}
			for i, f := range got {
				// Closed flows come as they close, the open one last.
				if i == len(got)-1 && f.Client != netip.MustParseAddr("10.0.0.4") {
					t.Errorf("last flow %+v, want the open one", f)
				}
				if w := want[f.Client]; f != w {
					t.Errorf("flow\n got %+v\nwant %+v", f, w)
				}
			}
			// 8 packets of the 8443 connection skipped, 1 late ACK; 3
			// closed connections of 8 packets, the split one of 9, the open
			// one of 5.
			if st.Packets != 3*8+9+5+1 || st.Skipped != 8 || st.Late != 1 || st.Malformed != 0 || st.Flows != 4 || st.Named != 3 || st.Evicted != 0 {
				t.Errorf("stats %+v", st)
			}
			// With 8443 configured too, its flow is there.
			got, _ = readPCAP(t, bytes.NewReader(trace), Options{Ports: []uint16{443, 8443}})
			n := 0
			for _, f := range got {
				if f.Port == 8443 && f.ServerName == "other.example" && f.Server == netip.MustParseAddr("192.0.2.4") {
					n++
				}
			}
			if len(got) != 5 || n != 1 {
				t.Errorf("with port 8443: %d flows, %d to 8443 named other.example", len(got), n)
			}
		})
	}
}

// TestPCAPEnds checks when flows are returned: idle past the timeout in
// trace time (before a flow that started earlier), on a RST, and evicted
// past the tracked-flow bound.
func TestPCAPEnds(t *testing.T) {
	var b bytes.Buffer
	pw := pcapgo.NewWriter(&b)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	w := &traceWriter{t: t, lt: layers.LinkTypeEthernet, out: pw.WritePacket}
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	ap := netip.MustParseAddrPort
	long, idle, rst := ap("10.0.0.1:1"), ap("10.0.0.2:2"), ap("10.0.0.3:3")
	srv := ap("192.0.2.1:443")
	w.send(t0, long, srv, "S", 1, 0, nil)
	w.send(t0.Add(time.Second), idle, srv, "S", 1, 0, nil)
	w.send(t0.Add(2*time.Second), rst, srv, "S", 1, 0, nil)
	w.send(t0.Add(3*time.Second), srv, rst, "R", 0, 0, nil)
	w.send(t0.Add(2*time.Minute), long, srv, "A", 2, 1, nil)
	w.send(t0.Add(6*time.Minute), srv, long, "A", 1, 2, nil)
	for _, tc := range []struct {
		maxFlows int
		order    []netip.AddrPort
		evicted  uint64
	}{
		// rst on its RST; idle when long's packet 6 minutes on sweeps
		// it; long at the end.
		{pcapMaxFlows, []netip.AddrPort{rst, idle, long}, 0},
		// With one flow tracked, each new one evicts the last.
		{1, []netip.AddrPort{long, idle, rst, long}, 2},
	} {
		pr, err := OpenPCAP(bytes.NewReader(b.Bytes()), Options{})
		if err != nil {
			t.Fatal(err)
		}
		pr.maxFlows = tc.maxFlows
		var got []netip.Addr
		for {
			f, err := pr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, f.Client)
		}
		want := make([]netip.Addr, len(tc.order))
		for i, a := range tc.order {
			want[i] = a.Addr()
		}
		if !slices.Equal(got, want) {
			t.Errorf("maxFlows %d: flows from %v, want %v", tc.maxFlows, got, want)
		}
		if st := pr.packetStats(); st.Evicted != tc.evicted {
			t.Errorf("maxFlows %d: %d evicted, want %d", tc.maxFlows, st.Evicted, tc.evicted)
		}
	}
}

// TestPCAPHostileLengths checks that a capture length in a corrupt header
// is refused before anything is allocated for it.
func TestPCAPHostileLengths(t *testing.T) {
	const huge = 200 << 20
	pcap := []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0} // snap length 4 GiB
	pcap = binary.LittleEndian.AppendUint32(pcap, 0)
	pcap = binary.LittleEndian.AppendUint32(pcap, 0)
	pcap = binary.LittleEndian.AppendUint32(pcap, huge)
	pcap = binary.LittleEndian.AppendUint32(pcap, huge)

	var ng bytes.Buffer
	nw, err := pcapgo.NewNgWriter(&ng, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	if err := nw.Flush(); err != nil {
		t.Fatal(err)
	}
	epb := binary.LittleEndian.AppendUint32(nil, 6)
	epb = binary.LittleEndian.AppendUint32(epb, 32)
	epb = binary.LittleEndian.AppendUint32(epb, 0) // interface
	epb = binary.LittleEndian.AppendUint64(epb, 0) // time
	epb = binary.LittleEndian.AppendUint32(epb, huge)
	epb = binary.LittleEndian.AppendUint32(epb, huge)
	epb = binary.LittleEndian.AppendUint32(epb, 32)

	for name, trace := range map[string][]byte{"pcap": pcap, "pcapng": append(ng.Bytes(), epb...)} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		pr, err := OpenPCAP(bytes.NewReader(trace), Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = pr.Next()
		runtime.ReadMemStats(&after)
		if err == nil || err == io.EOF {
			t.Errorf("%s: Next returned %v, want an error", name, err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > huge/2 {
			t.Errorf("%s: %d bytes allocated for a corrupt length", name, d)
		}
	}
}

func TestParseSNI(t *testing.T) {
	hello := clientHello(t, "www.Example.org")
	// The same handshake message cut into two records.
	msg := hello[5:]
	two := append([]byte{22, 3, 1, 0, 100}, msg[:100]...)
	two = append(two, 22, 3, 1, byte((len(msg)-100)>>8), byte(len(msg)-100))
	two = append(two, msg[100:]...)
	noSNI := clientHello(t, "")
	bad := slices.Clone(hello)
	bad[5] = 2 // a ServerHello
	for _, tc := range []struct {
		name string
		in   []byte
		sni  string
		err  error // nil, errNeedMore, or errAny
	}{
		{"one record", hello, "www.example.org", nil},
		{"curl's, captured", firstClientPayload(t, "tls-lo.pcap"), "a.example", nil},
		{"two records", two, "www.example.org", nil},
		{"no server_name", noSNI, "", nil},
		{"cut", hello[:len(hello)-1], "", errNeedMore},
		{"cut in the second record", two[:len(two)-10], "", errNeedMore},
		{"header only", hello[:3], "", errNeedMore},
		{"http", []byte("GET / HTTP/1.1\r\n"), "", errAny},
		{"not a ClientHello", bad, "", errAny},
		{"SSLv2 version", append([]byte{22, 2, 0}, hello[3:]...), "", errAny},
		{"trailing bytes", append(append([]byte{22, 3, 1, byte((len(msg) + 1) >> 8), byte(len(msg) + 1)}, msg[:1]...),
			append([]byte{msg[1], msg[2], msg[3] + 1}, append(msg[4:], 0)...)...), "", errAny},
	} {
		sni, err := parseSNI(tc.in)
		switch {
		case tc.err == nil && err != nil, tc.err == errNeedMore && err != errNeedMore,
			tc.err == errAny && (err == nil || err == errNeedMore):
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.err)
		case sni != tc.sni:
			t.Errorf("%s: %q, want %q", tc.name, sni, tc.sni)
		}
	}
}

var errAny = errors.New("any error")

func FuzzSNI(f *testing.F) {
	f.Add(clientHello(f, "a.example"))
	f.Add(clientHello(f, ""))
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	// curl's (OpenSSL 3.0's) ClientHello, from the real capture.
	f.Add(firstClientPayload(f, "tls-lo.pcap"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sni, err := parseSNI(b)
		if err != nil && sni != "" {
			t.Fatalf("name %q with error %v", sni, err)
		}
		if sni != "" {
			if checkHostName([]byte(sni)) != nil || strings.ToLower(sni) != sni {
				t.Fatalf("bad name %q", sni)
			}
		}
	})
}

func FuzzPCAP(f *testing.F) {
	for _, ng := range []bool{false, true} {
		trace, _ := makeTrace(f, ng, layers.LinkTypeEthernet)
		f.Add(trace)
	}
	trace, _ := makeTrace(f, false, layers.LinkTypeRaw)
	f.Add(trace)
	// Real captures: Linux cooked v1 and v2 and pcapng from tcpdump and dumpcap,
	// BSD null from real Go TLS connections.
	seed(f, "tls-sll.pcap", "tls-sll2.pcap", "tls-lo.pcapng")
	// pkie replay gen's captures: truncated data packets whose IP lengths
	// state their size, crypto/tls ClientHellos, retransmitted SYNs.
	seed(f, "gen-6.pcap", "gen-6-nosni.pcapng")
	f.Add(loopbackTrace(f, false, ltNull).pcap)
	f.Fuzz(func(t *testing.T, b []byte) {
		pr, err := OpenPCAP(bytes.NewReader(b), Options{Ports: []uint16{443, 80}})
		if err != nil {
			return
		}
		// Every flow has a packet, and a packet at least 20 bytes of
		// TCP header, so no trace of n bytes has more than n/20 flows.
		for n := 0; ; n++ {
			fl, err := pr.Next()
			if err != nil {
				break
			}
			if n > len(b)/20 {
				t.Fatalf("%d flows from %d bytes", n, len(b))
			}
			if fl.Duration < 0 || fl.PacketsIn+fl.PacketsOut == 0 || fl.BytesIn+fl.BytesOut < 20*(fl.PacketsIn+fl.PacketsOut) {
				t.Fatalf("flow %+v", fl)
			}
			if fl.ServerName != "" && checkHostName([]byte(fl.ServerName)) != nil {
				t.Fatalf("bad name %q", fl.ServerName)
			}
		}
	})
}

// firstClientPayload returns the first data a client sent to port 443 in a
// capture in testdata.
func firstClientPayload(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			t.Fatalf("%s: no client data: %v", name, err)
		}
		p := gopacket.NewPacket(data, r.LinkType(), gopacket.Default)
		if tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && tcp.DstPort == 443 && len(tcp.Payload) > 0 {
			return tcp.Payload
		}
	}
}
