package gen

import (
	"bufio"
	"container/heap"
	"crypto/ecdh"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/pkie/pkie/internal/replay"
)

// FormatPCAPNG is the pcapng form of the packet capture NewWriter writes;
// replay.FormatPCAP is the pcap one. The readers tell them apart by their
// magic number, so replay.Open knows both as replay.FormatPCAP.
const FormatPCAPNG = "pcapng"

// What a capture of the generator's flows is made of. A flow is a TCP
// connection: the handshake (SYN, SYN-ACK, ACK), a real TLS ClientHello
// carrying the flow's server name, the server's reply and the rest of
// both sides' bytes in data segments, then FIN and ACK both ways. Only the
// ClientHello is captured whole. Every other packet is captured to the
// end of its TCP header, its IP total length (and the record's original
// length) stating its size on the wire: a per-packet slice, as a capture
// that keeps the first bytes of a connection and the headers of the rest
// records it. The readers count IP bytes from the IP header, so a flow's
// bytes read back are the flow's own; its packets are fewer, since a
// data segment carries up to pcapMaxSegment bytes, as the segments a host
// with TCP segmentation offload (TSO/GRO) captures do, and no bare ACKs
// are written but the handshake's and the close's.
const (
	// pcapMaxSegment is the largest data segment, IP header included:
	// IPv4's largest packet.
	pcapMaxSegment = 65535
	// pcapMinSegment is the smallest data segment: headers and a byte.
	pcapMinSegment = ipHeader + tcpHeader + 1
	// pcapMSS is the TCP payload of a captured segment (an Ethernet MTU
	// less 52 bytes of headers): the ClientHello's segments.
	pcapMSS = 1448
	// pcapSnapLen is the files' snap length, tcpdump's default.
	pcapSnapLen = 262144
	// pcapMaxGap bounds the silence between a flow's packets: the
	// readers, as Zeek, end a connection silent for 5 minutes.
	pcapMaxGap = 2 * time.Minute
	// pcapRTT is the round-trip time of the handshake, shortened for
	// flows too short for it.
	pcapRTT = 20 * time.Millisecond
	// helloCacheSize bounds the ClientHellos kept, one a server name,
	// some 1.5 KB each: making one takes a quarter of a millisecond.
	helloCacheSize = 16384
	// pcapReuse is how long a never-answered connection's ends are not
	// used again: a reader cannot tell it ended until it has been idle
	// for 5 minutes (Zeek's tcp_inactivity_timeout, pkie's), and would
	// take a new connection's packets as its own.
	pcapReuse = 6 * time.Minute

	ethHeader = 14
	ipHeader  = 20
	tcpHeader = 32 // with the timestamp option, as Linux sends every segment
	synHeader = 40 // MSS, SACK permitted, timestamps, window scale
)

// synBytes is a SYN's size, IP header included: the generator's 60
// bytes. (ackBytes, ipHeader + tcpHeader, is the model's.)
const synBytes = ipHeader + synHeader

const (
	flagFIN = 1 << 0
	flagSYN = 1 << 1
	flagPSH = 1 << 3
	flagACK = 1 << 4
)

// packet is one packet of a flow, as planned when the flow is written.
type packet struct {
	at       int64 // Unix nanoseconds
	seq, ack uint32
	tsval    uint32
	tsecr    uint32
	ipLen    int32
	dir      uint8 // 0: client to server
	flags    uint8
	payload  []byte // the captured payload; nil for a truncated packet
}

// pcapFlow is a flow in progress: its packets not yet written.
type pcapFlow struct {
	id      uint64
	dead    bool // never answered
	client  netip.AddrPort
	server  netip.AddrPort
	ipID    [2]uint16
	packets []packet
	next    int
}

type flowHeap []*pcapFlow

func (h flowHeap) Len() int { return len(h) }
func (h flowHeap) Less(i, j int) bool {
	a, b := h[i].packets[h[i].next].at, h[j].packets[h[j].next].at
	return a < b || a == b && h[i].id < h[j].id
}
func (h flowHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *flowHeap) Push(x any)   { *h = append(*h, x.(*pcapFlow)) }
func (h *flowHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return f
}

// pcapWriter writes flows as a packet capture, packets in time order
// across flows. Flows must come in order of start, as the generator makes
// them; a flow's packets wait in a heap until no flow yet to come can
// start before them, so memory is the flows in progress, never the trace.
type pcapWriter struct {
	bw     *bufio.Writer
	write  func(gopacket.CaptureInfo, []byte) error
	flush  func() error
	hellos *helloCache
	flows  flowHeap
	// busy holds the connections' ends in use until the time they are
	// free again: those in progress (to the end of time until they end),
	// and the never-answered ones' for pcapReuse after.
	busy  map[[2]netip.AddrPort]int64
	n     uint64
	last  int64 // the latest start written
	frame []byte
	err   error
}

func newPCAPWriter(w io.Writer, ng bool) (*pcapWriter, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	pw := &pcapWriter{bw: bw, hellos: newHelloCache(helloCacheSize), busy: map[[2]netip.AddrPort]int64{}, last: -1 << 63}
	if ng {
		// Fixed section options (not the writing machine's), so that the
		// same flows make the same file anywhere.
		ngw, err := pcapgo.NewNgWriterInterface(bw, pcapgo.NgInterface{
			Name: "gen0", LinkType: layers.LinkTypeEthernet, SnapLength: pcapSnapLen, TimestampResolution: 9,
		}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "pkie replay gen"}})
		if err != nil {
			return nil, fmt.Errorf("gen: writing pcapng: %w", err)
		}
		pw.write, pw.flush = ngw.WritePacket, ngw.Flush
	} else {
		pcw := pcapgo.NewWriterNanos(bw)
		if err := pcw.WriteFileHeader(pcapSnapLen, layers.LinkTypeEthernet); err != nil {
			return nil, fmt.Errorf("gen: writing pcap: %w", err)
		}
		pw.write, pw.flush = pcw.WritePacket, func() error { return nil }
	}
	return pw, nil
}

// Write plans f's packets and writes every packet of the flows before it
// that is due by its start.
func (w *pcapWriter) Write(f replay.Flow) error {
	if w.err != nil {
		return w.err
	}
	start := f.Start.UnixNano()
	if start < w.last {
		return fmt.Errorf("gen: a packet capture needs flows in order of start: %s after %s", f.Start, time.Unix(0, w.last).UTC())
	}
	if !f.Client.Is4() || !f.Server.Is4() {
		return fmt.Errorf("gen: a packet capture of IPv6 flows is not supported (flow %s → %s)", f.Client, f.Server)
	}
	w.last = start
	if err := w.drain(start); err != nil {
		return err
	}
	w.n++
	fl, err := w.plan(f)
	if err != nil {
		w.err = err
		return err
	}
	heap.Push(&w.flows, fl)
	return nil
}

// Close writes the packets still pending and flushes the file.
func (w *pcapWriter) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.drain(1<<63 - 1); err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return fmt.Errorf("gen: writing the packet capture: %w", err)
	}
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("gen: writing the packet capture: %w", err)
	}
	return nil
}

// drain writes the pending packets due at or before t.
func (w *pcapWriter) drain(t int64) error {
	for len(w.flows) > 0 {
		fl := w.flows[0]
		p := &fl.packets[fl.next]
		if p.at > t {
			return nil
		}
		if err := w.emit(fl, p); err != nil {
			w.err = err
			return err
		}
		fl.next++
		if fl.next == len(fl.packets) {
			heap.Pop(&w.flows)
			k := [2]netip.AddrPort{fl.client, fl.server}
			if fl.dead {
				w.busy[k] = p.at + int64(pcapReuse)
			} else {
				delete(w.busy, k)
			}
		} else {
			heap.Fix(&w.flows, 0)
		}
	}
	return nil
}

// plan lays out f's packets.
func (w *pcapWriter) plan(f replay.Flow) (*pcapFlow, error) {
	// A client port not in use by the client towards the same server, so
	// that overlapping flows stay distinct connections.
	start := f.Start.UnixNano()
	if w.n%(1<<16) == 0 {
		for k, free := range w.busy {
			if free <= start {
				delete(w.busy, k)
			}
		}
	}
	port := clientPort(w.n, &f)
	server := netip.AddrPortFrom(f.Server, f.Port)
	for tries := 0; w.busy[[2]netip.AddrPort{netip.AddrPortFrom(f.Client, port), server}] > start; tries++ {
		if tries == 28232 {
			return nil, fmt.Errorf("gen: client %s has every port in use to %s", f.Client, server)
		}
		port = 32768 + (port-32768+1)%28232
	}
	fl := &pcapFlow{id: w.n, client: netip.AddrPortFrom(f.Client, port), server: server, dead: f.PacketsIn == 0}
	w.busy[[2]netip.AddrPort{fl.client, fl.server}] = 1<<63 - 1
	h := mix(w.n ^ uint64(f.Start.UnixNano()) ^ uint64(port)<<48)
	isn := [2]uint32{uint32(h), uint32(h >> 32)}
	fl.ipID = [2]uint16{uint16(h >> 16), uint16(h >> 40)}
	tsOff := [2]uint32{uint32(mix(h)), uint32(mix(h) >> 32)}

	t0, d := f.Start.UnixNano(), int64(max(f.Duration, 0))
	nxt := [2]uint32{isn[0], isn[1]}
	var lastTS [2]uint32
	add := func(at int64, dir int, flags uint8, ipLen int, payload []byte) {
		ts := uint32(at/int64(time.Millisecond)) + tsOff[dir]
		p := packet{at: at, dir: uint8(dir), flags: flags, seq: nxt[dir], ipLen: int32(ipLen), payload: payload, tsval: ts, tsecr: lastTS[1-dir]}
		if flags&flagACK != 0 {
			p.ack = nxt[1-dir]
		}
		hdr := ackBytes
		if flags&flagSYN != 0 {
			hdr = synBytes
		}
		nxt[dir] += uint32(ipLen - hdr)
		if flags&(flagSYN|flagFIN) != 0 {
			nxt[dir]++
		}
		lastTS[dir] = ts
		fl.packets = append(fl.packets, p)
	}

	if f.PacketsIn == 0 {
		// Never answered: the client's SYNs, retransmitted at
		// exponentially growing intervals over the flow's duration (the
		// generator's 0, 1 and 3 s), with the same sequence number.
		n := int(max(f.PacketsOut, 1))
		for i := range n {
			at := t0
			if n > 1 {
				at += d * int64(1<<i-1) / int64(1<<(n-1)-1)
			}
			nxt[0] = isn[0]
			add(at, 0, flagSYN, synBytes, nil)
		}
		return fl, nil
	}

	hello, err := w.hellos.get(f.ServerName)
	if err != nil {
		return nil, err
	}
	r := min(d/16, int64(pcapRTT))
	tEnd := t0 + d
	tReply, tFin := t0+3*r, tEnd-2*r

	// The bytes each side has left for data segments once the fixed
	// packets are counted; what is under a segment's size rides on the
	// side's FIN. A side whose flow has fewer bytes than its fixed
	// packets is written with the fixed packets' bytes.
	helloSegs := (len(hello) + pcapMSS - 1) / pcapMSS
	outData := int64(f.BytesOut) - int64(synBytes+ackBytes+helloSegs*ackBytes+len(hello)+2*ackBytes)
	inData := int64(f.BytesIn) - int64(synBytes+ackBytes)
	kOut, kIn := segments(outData), segments(inData)
	// Enough segments that no silence reaches pcapMaxGap.
	if need := int((tFin-tReply)/int64(pcapMaxGap)) + 1; kOut+kIn < need {
		kIn = max(kIn, min(need-kOut, int(max(inData, 0)/pcapMinSegment)))
		kOut = max(kOut, min(need-kIn, int(max(outData, 0)/pcapMinSegment)))
	}
	outFin, inFin := 0, 0
	if kOut == 0 && outData > 0 {
		outFin = int(outData)
	}
	if kIn == 0 && inData > 0 {
		inFin = int(inData)
	}

	add(t0, 0, flagSYN, synBytes, nil)
	add(t0+r, 1, flagSYN|flagACK, synBytes, nil)
	add(t0+2*r, 0, flagACK, ackBytes, nil)
	for p := hello; len(p) > 0; {
		n := min(len(p), pcapMSS)
		add(t0+2*r, 0, flagACK|flagPSH, ackBytes+n, p[:n])
		p = p[n:]
	}
	// The server's reply first, then the client's data segments, then
	// the rest of the server's, evenly over the flow.
	var at func(i int) int64
	if m := kOut + kIn - 1; m > 0 {
		at = func(i int) int64 {
			if i == 0 {
				return tReply
			}
			return tReply + (tFin-tReply)*int64(i)/int64(m+1)
		}
	} else {
		at = func(int) int64 { return tReply }
	}
	i := 0
	if kIn > 0 {
		add(at(i), 1, flagACK|flagPSH, segSize(inData, kIn, 0), nil)
		i++
	}
	for j := range kOut {
		add(at(i), 0, flagACK|flagPSH, segSize(outData, kOut, j), nil)
		i++
	}
	for j := 1; j < kIn; j++ {
		add(at(i), 1, flagACK|flagPSH, segSize(inData, kIn, j), nil)
		i++
	}
	add(tFin, 0, flagFIN|flagACK, ackBytes+outFin, nil)
	add(tEnd-r, 1, flagFIN|flagACK, ackBytes+inFin, nil)
	add(tEnd, 0, flagACK, ackBytes, nil)
	return fl, nil
}

// segments is how many data segments carry data bytes (IP headers
// included): none under a segment's minimum, else as few as
// pcapMaxSegment allows.
func segments(data int64) int {
	if data < pcapMinSegment {
		return 0
	}
	return int((data + pcapMaxSegment - 1) / pcapMaxSegment)
}

// segSize is the size of the j'th of k segments sharing data bytes.
func segSize(data int64, k, j int) int {
	s := data / int64(k)
	if int64(j) < data%int64(k) {
		s++
	}
	return int(s)
}

// The link layer's addresses: the client's side and the server's, as a
// capture at a campus's border router sees them.
var (
	macClient = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	macServer = [6]byte{0x02, 0, 0, 0, 0, 0x02}
)

// emit writes one packet as an Ethernet frame.
func (w *pcapWriter) emit(fl *pcapFlow, p *packet) error {
	src, dst := fl.client, fl.server
	smac, dmac := macClient, macServer
	ttl := byte(64)
	if p.dir == 1 {
		src, dst = dst, src
		smac, dmac = dmac, smac
		ttl = 52 // a few hops away
	}
	hdr := tcpHeader
	if p.flags&flagSYN != 0 {
		hdr = synHeader
	}
	b := w.frame[:0]
	b = append(b, dmac[:]...)
	b = append(b, smac[:]...)
	b = append(b, 0x08, 0x00)
	ip := len(b)
	fl.ipID[p.dir]++
	b = append(b, 0x45, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(p.ipLen))
	b = binary.BigEndian.AppendUint16(b, fl.ipID[p.dir])
	b = append(b, 0x40, 0, ttl, 6, 0, 0) // don't fragment; TCP; checksum below
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	b = append(b, s4[:]...)
	b = append(b, d4[:]...)
	binary.BigEndian.PutUint16(b[ip+10:], ^fold(sum(b[ip:ip+ipHeader], 0)))

	tcp := len(b)
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	b = binary.BigEndian.AppendUint32(b, p.seq)
	b = binary.BigEndian.AppendUint32(b, p.ack)
	win := uint16(502) // 64,256 bytes at Linux's window scale of 7
	if p.flags&flagSYN != 0 {
		win = 64240
	}
	b = append(b, byte(hdr/4)<<4, p.flags)
	b = binary.BigEndian.AppendUint16(b, win)
	b = append(b, 0, 0, 0, 0) // checksum below, urgent pointer
	if p.flags&flagSYN != 0 {
		// Linux's SYN options: MSS, SACK permitted, timestamps, NOP,
		// window scale.
		b = append(b, 2, 4, 0x05, 0xb4, 4, 2, 8, 10)
		b = binary.BigEndian.AppendUint32(b, p.tsval)
		b = binary.BigEndian.AppendUint32(b, p.tsecr)
		b = append(b, 1, 3, 3, 7)
	} else {
		b = append(b, 1, 1, 8, 10)
		b = binary.BigEndian.AppendUint32(b, p.tsval)
		b = binary.BigEndian.AppendUint32(b, p.tsecr)
	}
	b = append(b, p.payload...)
	// The checksum of the packet on the wire: a truncated packet's
	// payload is not in the capture, and is taken as zeros, which add
	// nothing to the sum.
	tcpLen := int(p.ipLen) - ipHeader
	pseudo := uint32(s4[0])<<8 | uint32(s4[1])
	pseudo += uint32(s4[2])<<8 | uint32(s4[3])
	pseudo += uint32(d4[0])<<8 | uint32(d4[1])
	pseudo += uint32(d4[2])<<8 | uint32(d4[3])
	pseudo += 6 + uint32(tcpLen)
	binary.BigEndian.PutUint16(b[tcp+16:], ^fold(sum(b[tcp:], pseudo)))
	w.frame = b

	ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, p.at), CaptureLength: len(b), Length: ethHeader + int(p.ipLen)}
	if err := w.write(ci, b); err != nil {
		return fmt.Errorf("gen: writing the packet capture: %w", err)
	}
	return nil
}

// sum adds b's 16-bit big-endian words to s (RFC 1071).
func sum(b []byte, s uint32) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// helloCache holds ClientHellos by server name, the least recently used
// dropped past its size. A hello depends on the name alone, so what is
// dropped is made again the same.
type helloCache struct {
	max   int
	m     map[string]*helloEntry
	clock uint64
}

type helloEntry struct {
	hello []byte
	used  uint64
}

func newHelloCache(n int) *helloCache { return &helloCache{max: n, m: make(map[string]*helloEntry)} }

func (c *helloCache) get(name string) ([]byte, error) {
	c.clock++
	if e, ok := c.m[name]; ok {
		e.used = c.clock
		return e.hello, nil
	}
	h, err := clientHello(name)
	if err != nil {
		return nil, err
	}
	if len(c.m) >= c.max {
		// Evict the least recently used of a handful: cheap, and near
		// enough to LRU for a cache of popular names.
		var victim string
		oldest := ^uint64(0)
		n := 0
		for k, e := range c.m {
			if e.used < oldest {
				victim, oldest = k, e.used
			}
			if n++; n == 8 {
				break
			}
		}
		delete(c.m, victim)
	}
	c.m[name] = &helloEntry{hello: h, used: c.clock}
	return h, nil
}

// clientHello returns the ClientHello record crypto/tls sends asking for
// name ("" sends no server_name extension), as Go's net/http client
// configures it (ALPN h2 and http/1.1), taken off a net.Pipe. Its random,
// session ID and ML-KEM key come from a generator seeded by the name, so
// the same name gives the same bytes; crypto/tls draws the X25519 key from
// the system's randomness whatever it is given, so that key, sent in the
// X25519MLKEM768 share and the X25519 share, is replaced by one derived
// from the name too: the hello stays one crypto/tls would send.
func clientHello(name string) ([]byte, error) {
	seed := sha256.Sum256([]byte("pkie replay gen ClientHello\x00" + name))
	c, s := net.Pipe()
	defer s.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.Close()
		tc := tls.Client(c, &tls.Config{
			ServerName: name, InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"},
			Rand: rand.NewChaCha8(seed),
		})
		tc.Handshake() // fails when the pipe closes, after the ClientHello
	}()
	s.SetDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(s, hdr); err != nil {
		return nil, fmt.Errorf("gen: making a ClientHello: %w", err)
	}
	rec := make([]byte, 5+int(binary.BigEndian.Uint16(hdr[3:])))
	copy(rec, hdr)
	if _, err := io.ReadFull(s, rec[5:]); err != nil {
		return nil, fmt.Errorf("gen: making a ClientHello: %w", err)
	}
	s.Close()
	<-done
	kseed := sha256.Sum256(append(seed[:], "x25519"...))
	priv, err := ecdh.X25519().NewPrivateKey(kseed[:])
	if err != nil {
		return nil, err
	}
	if err := setX25519(rec, priv.PublicKey().Bytes()); err != nil {
		return nil, fmt.Errorf("gen: crypto/tls's ClientHello for %q: %w", name, err)
	}
	return rec, nil
}

// The key_share groups whose X25519 key setX25519 replaces.
const (
	groupX25519         = 0x001d
	groupX25519MLKEM768 = 0x11ec
)

// setX25519 replaces the X25519 public key of a ClientHello record's
// key shares (RFC 8446, §4.2.8; draft-ietf-tls-ecdhe-mlkem, whose
// X25519MLKEM768 share ends with it).
func setX25519(rec, pub []byte) error {
	b := rec[5:]
	if len(b) < 4 || b[0] != 1 || len(rec) < 5+4+int(b[1])<<16|int(b[2])<<8|int(b[3]) {
		return errors.New("not one ClientHello record")
	}
	p := 4 + 2 + 32 // handshake header, version, random
	skip := func(lenBytes int) bool {
		if p+lenBytes > len(b) {
			return false
		}
		n := 0
		for i := range lenBytes {
			n = n<<8 | int(b[p+i])
		}
		p += lenBytes + n
		return p <= len(b)
	}
	if !skip(1) || !skip(2) || !skip(1) || p+2 > len(b) { // session ID, suites, compression
		return errors.New("truncated")
	}
	end := p + 2 + int(binary.BigEndian.Uint16(b[p:]))
	p += 2
	if end > len(b) {
		return errors.New("truncated extensions")
	}
	replaced := 0
	for p+4 <= end {
		typ, n := binary.BigEndian.Uint16(b[p:]), int(binary.BigEndian.Uint16(b[p+2:]))
		p += 4
		if p+n > end {
			return errors.New("truncated extension")
		}
		if typ == 51 { // key_share
			q, qend := p+2, p+n
			for q+4 <= qend {
				group, kn := binary.BigEndian.Uint16(b[q:]), int(binary.BigEndian.Uint16(b[q+2:]))
				q += 4
				if q+kn > qend {
					return errors.New("truncated key share")
				}
				switch {
				case group == groupX25519 && kn == 32:
					copy(b[q:], pub)
					replaced++
				case group == groupX25519MLKEM768 && kn >= 32:
					copy(b[q+kn-32:], pub)
					replaced++
				}
				q += kn
			}
		}
		p += n
	}
	if replaced == 0 {
		return errors.New("no X25519 key share")
	}
	return nil
}
