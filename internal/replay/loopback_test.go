package replay

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// This file captures real TLS connections on loopback without a capture
// tool: Go's TLS clients, each asking for its own server name from its
// own loopback address, talk to a Go TLS server, and every byte each
// client's socket writes or reads is recorded with its time. The capture
// is then the TCP/IP frames those bytes travelled in: handshake, data in
// segments of at most one MSS with the receiver's ACK, FIN each way and
// its ACK, with sequence numbers that add up. The server listens on an
// ephemeral port; the frames say 443, as a server on the web would.

// loopbackMSS is the segment size of the frames: an Ethernet MTU's.
const loopbackMSS = 1448

// loopbackNames are the clients' server names, one client each; "" sends
// no SNI.
var loopbackNames = []string{"a.example", "b.example", "c.example", "", "www.long-enough-name.example"}

// loopbackCapture is a trace of real connections and what a reader must
// find in it.
type loopbackCapture struct {
	pcap   []byte
	frames int
	names  []string // server names by client, in order of connection start
	want   map[netip.Addr]Flow
	// splitHellos counts the ClientHellos longer than a segment.
	splitHellos int
}

// event is one thing a client's socket did.
type event struct {
	at   time.Time
	kind byte // 'w' wrote, 'r' read, 'e' read EOF (the server's FIN), 'c' closed
	data []byte
}

// recordingConn records a client socket's bytes.
type recordingConn struct {
	net.Conn
	mu     sync.Mutex
	events []event
	eof    bool
}

func (c *recordingConn) add(kind byte, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Wall time in UTC, as a capture's.
	c.events = append(c.events, event{time.Now().Round(0).UTC(), kind, slices.Clone(data)})
}

func (c *recordingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.add('w', p[:n])
	}
	return n, err
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.add('r', p[:n])
	}
	if errors.Is(err, io.EOF) && !c.eof {
		c.eof = true
		c.add('e', nil)
	}
	return n, err
}

func (c *recordingConn) Close() error {
	c.add('c', nil)
	return c.Conn.Close()
}

// selfSigned returns a certificate for the loopback names.
func selfSigned(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "loopback"},
		DNSNames:     []string{"a.example", "b.example", "c.example", "www.long-enough-name.example"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// runLoopbackTLS makes the connections and returns each client's
// recording and local address, in the order of loopbackNames.
func runLoopbackTLS(t testing.TB) ([]*recordingConn, []netip.AddrPort) {
	t.Helper()
	cert := selfSigned(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pool := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	pool.AddCert(leaf)

	var served sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			served.Add(1)
			go func() {
				defer served.Done()
				defer c.Close()
				tc := c.(*tls.Conn)
				tc.SetDeadline(time.Now().Add(30 * time.Second))
				br := bufio.NewReader(tc)
				var host string
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if h, ok := strings.CutPrefix(line, "Host: "); ok {
						host = strings.TrimSpace(h)
					}
					if line == "\r\n" {
						break
					}
				}
				// A response whose size tells the names apart, over
				// several segments.
				body := strings.Repeat("x", 2000+1000*len(host))
				fmt.Fprintf(tc, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
				// close_notify and FIN, then wait for the client's.
				tc.CloseWrite()
				io.Copy(io.Discard, br)
			}()
		}
	}()

	recs := make([]*recordingConn, len(loopbackNames))
	addrs := make([]netip.AddrPort, len(loopbackNames))
	var wg sync.WaitGroup
	errs := make(chan error, len(loopbackNames))
	for i, name := range loopbackNames {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(10+i))}}
			rc := &recordingConn{}
			rc.add('d', nil) // the SYN leaves now
			raw, err := d.Dial("tcp", ln.Addr().String())
			if err != nil {
				errs <- err
				return
			}
			rc.Conn = raw
			addrs[i] = raw.LocalAddr().(*net.TCPAddr).AddrPort()
			recs[i] = rc
			// Without a name, Go sends no SNI and needs no verification.
			c := tls.Client(rc, &tls.Config{ServerName: name, RootCAs: pool, InsecureSkipVerify: name == ""})
			c.SetDeadline(time.Now().Add(30 * time.Second))
			host := name
			if host == "" {
				host = "127.0.0.1"
			}
			if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
				errs <- err
				return
			}
			resp, err := io.ReadAll(c)
			if err != nil {
				errs <- err
				return
			}
			if !bytes.HasPrefix(resp, []byte("HTTP/1.1 200 OK")) {
				errs <- fmt.Errorf("%q: response %.40q", name, resp)
			}
			c.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ln.Close()
	served.Wait()
	return recs, addrs
}

// frame is one packet of the capture.
type frame struct {
	at            time.Time
	src, dst      netip.AddrPort
	syn, ack, fin bool
	seq, ackn     uint32
	payload       []byte
}

// framesOf turns a client's recording into the packets of its connection,
// and the flow they make.
func framesOf(rec *recordingConn, client, server netip.AddrPort, isn uint32) ([]frame, Flow) {
	var fs []frame
	last := rec.events[0].at
	at := func(t time.Time) time.Time {
		// Strictly increasing within the connection, so that a sort by
		// time keeps its order.
		if !t.After(last) {
			t = last.Add(time.Microsecond)
		}
		last = t
		return t
	}
	seq := [2]uint32{isn, isn + 1<<30} // client's, server's next
	ends := [2]netip.AddrPort{client, server}
	send := func(t time.Time, dir int, flags string, payload []byte) {
		f := frame{at: at(t), src: ends[dir], dst: ends[1-dir], seq: seq[dir], ackn: seq[1-dir], payload: payload,
			syn: strings.Contains(flags, "S"), ack: strings.Contains(flags, "A"), fin: strings.Contains(flags, "F")}
		fs = append(fs, f)
		seq[dir] += uint32(len(payload))
		if f.syn || f.fin {
			seq[dir]++
		}
	}
	t0 := rec.events[0].at
	send(t0, 0, "S", nil)
	fs[0].ackn = 0
	send(t0, 1, "SA", nil)
	send(t0, 0, "A", nil)
	for _, e := range rec.events[1:] {
		dir := 0
		switch e.kind {
		case 'r':
			dir = 1
			fallthrough
		case 'w':
			for p := e.data; len(p) > 0; {
				n := min(len(p), loopbackMSS)
				send(e.at, dir, "PA", p[:n])
				p = p[n:]
			}
			send(e.at, 1-dir, "A", nil)
		case 'e':
			send(e.at, 1, "FA", nil)
			send(e.at, 0, "A", nil)
		case 'c':
			send(e.at, 0, "FA", nil)
			send(e.at, 1, "A", nil)
		}
	}
	f := Flow{Start: fs[0].at, Duration: fs[len(fs)-1].at.Sub(fs[0].at), Client: client.Addr(), Server: server.Addr(), Port: server.Port()}
	for _, fr := range fs {
		n := uint64(20 + 20 + len(fr.payload))
		if fr.src == client {
			f.PacketsOut++
			f.BytesOut += n
		} else {
			f.PacketsIn++
			f.BytesIn += n
		}
	}
	return fs, f
}

// linkHeader is what a link type puts before an IPv4 packet.
func linkHeader(lt layers.LinkType, outgoing bool) []byte {
	switch lt {
	case layers.LinkTypeEthernet:
		return []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00} // lo's zero MACs
	case layers.LinkTypeLinuxSLL:
		// Packet type (0 to us, 4 sent by us), ARPHRD_LOOPBACK, a
		// 6-byte all-zero address, EtherType IPv4.
		h := make([]byte, 16)
		if outgoing {
			h[1] = 4
		}
		binary.BigEndian.PutUint16(h[2:], 772)
		binary.BigEndian.PutUint16(h[4:], 6)
		binary.BigEndian.PutUint16(h[14:], 0x0800)
		return h
	case layers.LinkTypeNull:
		return binary.LittleEndian.AppendUint32(nil, 2) // AF_INET, host order (BSD on x86 and ARM)
	case layers.LinkTypeLoop:
		return binary.BigEndian.AppendUint32(nil, 2) // AF_INET, network order (OpenBSD)
	}
	panic(lt)
}

// loopbackTrace makes real connections and writes their capture as pcap
// or pcapng of the given link type.
func loopbackTrace(t testing.TB, ng bool, lt layers.LinkType) loopbackCapture {
	t.Helper()
	recs, addrs := runLoopbackTLS(t)
	server := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 443)
	lc := loopbackCapture{want: map[netip.Addr]Flow{}}
	var all []frame
	type start struct {
		at   time.Time
		name string
	}
	var starts []start
	for i, rec := range recs {
		fs, f := framesOf(rec, addrs[i], server, uint32(1000+i*7919))
		for _, e := range rec.events {
			if e.kind == 'w' {
				if len(e.data) > loopbackMSS {
					lc.splitHellos++
				}
				break
			}
		}
		f.ServerName = loopbackNames[i]
		lc.want[f.Client] = f
		all = append(all, fs...)
		starts = append(starts, start{f.Start, loopbackNames[i]})
	}
	slices.SortStableFunc(all, func(a, b frame) int { return a.at.Compare(b.at) })
	slices.SortFunc(starts, func(a, b start) int { return a.at.Compare(b.at) })
	for _, s := range starts {
		lc.names = append(lc.names, s.name)
	}

	var out bytes.Buffer
	var write func(gopacket.CaptureInfo, []byte) error
	flush := func() error { return nil }
	if ng {
		w, err := pcapgo.NewNgWriter(&out, lt)
		if err != nil {
			t.Fatal(err)
		}
		write, flush = w.WritePacket, w.Flush
	} else {
		w := pcapgo.NewWriterNanos(&out)
		if err := w.WriteFileHeader(262144, lt); err != nil {
			t.Fatal(err)
		}
		write = w.WritePacket
	}
	for _, fr := range all {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: fr.src.Addr().AsSlice(), DstIP: fr.dst.Addr().AsSlice()}
		tcp := &layers.TCP{SrcPort: layers.TCPPort(fr.src.Port()), DstPort: layers.TCPPort(fr.dst.Port()),
			Seq: fr.seq, Ack: fr.ackn, SYN: fr.syn, ACK: fr.ack, FIN: fr.fin, PSH: len(fr.payload) > 0, Window: 65535}
		if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			ip, tcp, gopacket.Payload(fr.payload)); err != nil {
			t.Fatal(err)
		}
		b := append(linkHeader(lt, fr.dst.Port() == 443), buf.Bytes()...)
		if err := write(gopacket.CaptureInfo{Timestamp: fr.at, CaptureLength: len(b), Length: len(b)}, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	lc.frames = len(all)
	lc.pcap = out.Bytes()
	return lc
}

// TestLoopbackTLS reads captures of real TLS connections in every link
// type a loopback capture comes in: Ethernet (Linux's lo), Linux cooked
// (tcpdump -i any), BSD null and OpenBSD loop (lo0), as pcap and pcapng.
func TestLoopbackTLS(t *testing.T) {
	for _, tc := range []struct {
		ng bool
		lt layers.LinkType
	}{
		{false, layers.LinkTypeEthernet},
		{false, layers.LinkTypeLinuxSLL},
		{false, layers.LinkTypeNull},
		{false, layers.LinkTypeLoop},
		{true, layers.LinkTypeEthernet},
		{true, layers.LinkTypeLinuxSLL},
		{true, layers.LinkTypeNull},
	} {
		name := "pcap/" + tc.lt.String()
		if tc.ng {
			name = "pcapng/" + tc.lt.String()
		}
		t.Run(name, func(t *testing.T) {
			lc := loopbackTrace(t, tc.ng, tc.lt)
			r := mustOpen(t, lc.pcap, FormatAuto)
			flows := drainFlows(t, r)
			if len(flows) != len(loopbackNames) {
				t.Fatalf("%d flows, want %d: %+v", len(flows), len(loopbackNames), flows)
			}
			for _, f := range flows {
				if w, ok := lc.want[f.Client]; !ok || f != w {
					t.Errorf("flow\n got %+v\nwant %+v", f, w)
				}
			}
			st := r.Stats()
			if st.Packets != int64(lc.frames) || st.Kept != 5 || st.Named != 4 || st.Malformed != 0 || st.Late != 0 {
				t.Errorf("stats %+v, want %d packets, 5 kept, 4 named", st, lc.frames)
			}
			// Go's ClientHello, with its post-quantum key share, is longer
			// than a segment: the names above were found only because
			// reassembly works.
			if lc.splitHellos == 0 {
				t.Errorf("no ClientHello longer than %d bytes: the trace does not test reassembly", loopbackMSS)
			}
		})
	}
}
