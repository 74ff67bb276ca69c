package replay

import (
	"bufio"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// pcapStats counts what a pcap reader saw and what it left out.
type pcapStats struct {
	Packets   uint64 // packets read from the file
	Skipped   uint64 // TCP not to or from a configured port, or an IP fragment past the first
	Malformed uint64 // frames that did not decode
	// OtherLink counts packets of a link type the reader does not
	// decode, the first of which is otherLinkType.
	OtherLink     uint64
	otherLinkType uint16
	NonTCP        uint64 // not TCP over IPv4 or IPv6
	Truncated     uint64 // captured shorter than on the wire
	Flows         uint64 // flows returned
	Named         uint64 // flows returned with a server name
	// Evicted counts flows returned early because maxFlows were tracked
	// at once: the least recently active one is returned as it stands,
	// and later packets of its connection start a new flow.
	Evicted uint64
	// Late counts packets of a connection already returned as closed
	// (retransmissions, a final ACK), which no flow counts.
	Late uint64
}

const (
	// pcapMaxFlows bounds the connections tracked at once, and so the
	// reader's memory: about maxHelloBytes each at worst.
	pcapMaxFlows = 1 << 16
	// pcapIdleTimeout ends a connection silent this long in trace time:
	// Zeek's tcp_inactivity_timeout.
	pcapIdleTimeout = 5 * time.Minute
	// pcapMaxCapture bounds a frame's captured length (tcpdump's default
	// snap length), so a corrupt header cannot make the reader allocate
	// gigabytes.
	pcapMaxCapture = 262144
	// pcapMaxPending bounds the out-of-order segments held per flow while
	// the ClientHello is reassembled.
	pcapMaxPending = 64
)

// linkTypeLinuxSLL2 is Linux cooked capture v2 (LINKTYPE_LINUX_SLL2), what
// tcpdump -i any writes since libpcap 1.10. gopacket's layers.LinkType is
// a byte, so it cannot name it: link types are kept here as the files'
// 16-bit values.
const linkTypeLinuxSLL2 = 276

// packetSource is what pcapgo's two readers have in common.
type packetSource interface {
	ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// PCAPReader reads flows from a pcap or pcapng trace. Its flows' byte
// counts are IP bytes as the IP header states them, IP header included (so
// a capture truncated by its snap length still counts in full): what
// nfdump's bytes and Zeek's orig_ip_bytes and resp_ip_bytes count, so that
// one capture gives the same counts read directly or through either tool.
// Packets count every TCP segment, SYNs and bare ACKs included.
//
// Flows are returned when their connection ends: when both sides' FINs
// have been acknowledged, on a RST, after pcapIdleTimeout of trace time
// without a packet, or at the end of the trace (then in order of start).
// They are therefore not in order of start.
type PCAPReader struct {
	src      packetSource
	ng       *pcapgo.NgReader // nil for pcap
	capped   *cappedReader    // the pcapng stream, which knows its interfaces' link types
	linkType uint16           // a pcap file's
	ports    []uint16

	flows  map[flowKey]*list.Element // of *pcapFlow
	lru    *list.List                // least recently active at the back
	closed map[flowKey]time.Time     // recently returned, for late packets
	// closedQ is closed's entries in the order they were added, from
	// closedHead on: the oldest are forgotten first, in constant time.
	closedQ    []closedEntry
	closedHead int
	ready      []Flow
	now        time.Time
	swept      time.Time
	eof        error
	stats      pcapStats
	// The bounds, pcapMaxFlows and pcapIdleTimeout unless a test
	// changes them.
	maxFlows int
	idle     time.Duration
}

type closedEntry struct {
	key  flowKey
	last time.Time
}

// flowKey names a connection from the client's side.
type flowKey struct {
	client, server netip.AddrPort
}

type pcapFlow struct {
	key     flowKey
	f       Flow
	last    time.Time
	fin     [2]uint32 // each side's FIN sequence number + 1 (0: none)
	finAckd [2]bool
	// Reassembly of the client's first bytes, until helloDone.
	base      uint32
	haveBase  bool
	hello     []byte
	pending   map[uint32][]byte
	helloDone bool
}

// OpenPCAP reads a pcap or pcapng trace from r, recognised by its magic
// number, streaming. Link types Ethernet, Linux cooked (SLL and SLL2), raw
// IP, IPv4, IPv6 and BSD loopback are decoded.
func OpenPCAP(r io.Reader, opt Options) (*PCAPReader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("replay: reading the trace's magic number: %w", err)
	}
	pr := &PCAPReader{
		ports:  opt.Ports,
		flows:  make(map[flowKey]*list.Element),
		lru:    list.New(),
		closed: make(map[flowKey]time.Time),

		maxFlows: pcapMaxFlows,
		idle:     pcapIdleTimeout,
	}
	if len(pr.ports) == 0 {
		pr.ports = []uint16{443}
	}
	if magic[0] == 0x0a && magic[1] == 0x0d && magic[2] == 0x0d && magic[3] == 0x0a {
		pr.capped = &cappedReader{br: br}
		ng, err := pcapgo.NewNgReader(pr.capped, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, fmt.Errorf("replay: not a pcapng trace: %w", err)
		}
		pr.src, pr.ng = ng, ng
	} else {
		// pcapgo truncates the header's link type to a byte: read it here.
		hdr, _ := br.Peek(24)
		if len(hdr) == 24 {
			if magic[0] == 0xd4 || magic[0] == 0x4d {
				pr.linkType = binary.LittleEndian.Uint16(hdr[20:])
			} else {
				pr.linkType = binary.BigEndian.Uint16(hdr[22:])
			}
		}
		p, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("replay: not a pcap or pcapng trace: %w", err)
		}
		if p.Snaplen() > pcapMaxCapture {
			p.SetSnaplen(pcapMaxCapture)
		}
		pr.src = p
	}
	return pr, nil
}

// Stats reports what has been read so far in the terms every reader uses.
// A packet trace has no flow records of other ports to count, so Read is
// the flows returned, as Kept; packets skipped are in packetStats.
func (pr *PCAPReader) Stats() Stats {
	s := pr.stats
	st := Stats{
		Read: int64(s.Flows), Kept: int64(s.Flows), Named: int64(s.Named), Malformed: int64(s.Malformed),
		Packets: int64(s.Packets), Evicted: int64(s.Evicted), Late: int64(s.Late),
		OtherLink: int64(s.OtherLink), NonTCP: int64(s.NonTCP), Truncated: int64(s.Truncated),
	}
	if s.OtherLink > 0 {
		st.OtherLinkType = linkTypeName(s.otherLinkType)
	}
	return st
}

// linkTypeName names a link type as tcpdump's -L does where gopacket
// knows it, by number always.
func linkTypeName(lt uint16) string {
	switch {
	case lt == linkTypeLinuxSLL2:
		return "276 (LINUX_SLL2)"
	case lt == 0xffff:
		// cappedReader's answer for a packet of an interface the
		// pcapng section did not describe.
		return "none (a packet of an undescribed pcapng interface)"
	case lt <= 0xff:
		if n := layers.LinkType(lt).String(); !strings.HasPrefix(n, "Unknown") {
			return fmt.Sprintf("%d (%s)", lt, n)
		}
	}
	return strconv.Itoa(int(lt))
}

// packetStats reports the packet-level counts, skipped packets included.
func (pr *PCAPReader) packetStats() pcapStats { return pr.stats }

// Next returns the next flow to end, or io.EOF after the last.
func (pr *PCAPReader) Next() (Flow, error) {
	for len(pr.ready) == 0 {
		if pr.eof != nil {
			return Flow{}, pr.eof
		}
		data, ci, err := pr.src.ReadPacketData()
		if err != nil {
			pr.flush()
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) && pr.stats.Packets > 0 {
				// A trace cut short mid-packet (a capture killed
				// while writing) still has its flows.
				pr.eof = io.EOF
			} else {
				pr.eof = fmt.Errorf("replay: reading packet %d: %w", pr.stats.Packets+1, err)
			}
			continue
		}
		pr.stats.Packets++
		lt := pr.linkType
		if pr.ng != nil {
			lt = pr.capped.linkType(ci.InterfaceIndex)
		}
		pr.packet(data, ci, lt)
	}
	f := pr.ready[0]
	pr.ready = pr.ready[1:]
	pr.stats.Flows++
	if f.ServerName != "" {
		pr.stats.Named++
	}
	return f, nil
}

func (pr *PCAPReader) isServerPort(p uint16) bool { return slices.Contains(pr.ports, p) }

// packet accounts one captured frame.
func (pr *PCAPReader) packet(data []byte, ci gopacket.CaptureInfo, lt uint16) {
	if ci.CaptureLength < ci.Length {
		pr.stats.Truncated++
	}
	var first gopacket.Decoder
	switch lt {
	case uint16(layers.LinkTypeEthernet), uint16(layers.LinkTypeLinuxSLL), uint16(layers.LinkTypeNull), uint16(layers.LinkTypeLoop):
		first = layers.LinkType(lt)
	case uint16(layers.LinkTypeRaw), uint16(layers.LinkTypeIPv4), uint16(layers.LinkTypeIPv6), 12 /* raw IP on OpenBSD */ :
		first = layers.LinkTypeRaw
	case linkTypeLinuxSLL2:
		// gopacket has no decoder for it. Its 20-byte header starts with
		// the EtherType.
		if len(data) < 20 {
			pr.stats.Malformed++
			return
		}
		switch layers.EthernetType(binary.BigEndian.Uint16(data)) {
		case layers.EthernetTypeIPv4:
			first = layers.LayerTypeIPv4
		case layers.EthernetTypeIPv6:
			first = layers.LayerTypeIPv6
		default:
			pr.stats.NonTCP++
			return
		}
		data = data[20:]
	default:
		if pr.stats.OtherLink == 0 {
			pr.stats.otherLinkType = lt
		}
		pr.stats.OtherLink++
		return
	}
	pkt := gopacket.NewPacket(data, first, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	var src, dst netip.Addr
	var ipLen, ipHdr int
	switch ip := pkt.NetworkLayer().(type) {
	case *layers.IPv4:
		if ip.Protocol != layers.IPProtocolTCP {
			pr.stats.NonTCP++
			return
		}
		if ip.FragOffset != 0 {
			pr.stats.Skipped++
			return
		}
		src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
		dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
		ipLen, ipHdr = int(ip.Length), int(ip.IHL)*4
	case *layers.IPv6:
		src, _ = netip.AddrFromSlice(ip.SrcIP.To16())
		dst, _ = netip.AddrFromSlice(ip.DstIP.To16())
		// The payload length excludes the fixed header.
		ipLen, ipHdr = 40+int(ip.Length), 40
	case nil:
		if pkt.ErrorLayer() != nil {
			pr.stats.Malformed++
		} else {
			pr.stats.NonTCP++
		}
		return
	default:
		pr.stats.NonTCP++
		return
	}
	tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if tcp == nil || len(tcp.Contents) < 20 {
		// A lazily decoded packet keeps the TCP layer it failed to
		// decode, empty: a header cut short by the capture.
		if pkt.ErrorLayer() != nil {
			pr.stats.Malformed++
		} else {
			pr.stats.NonTCP++
		}
		return
	}
	if seg := ipHdr + len(tcp.Contents) + len(tcp.Payload); ipLen < seg {
		// A length field understating what decoded (an IPv6 jumbogram's
		// zero, say): count what is there.
		ipLen = seg
	}
	sp, dp := uint16(tcp.SrcPort), uint16(tcp.DstPort)
	var key flowKey
	var dir int // 0: client to server, 1: back
	switch {
	case pr.isServerPort(dp):
		key = flowKey{netip.AddrPortFrom(src, sp), netip.AddrPortFrom(dst, dp)}
	case pr.isServerPort(sp):
		key, dir = flowKey{netip.AddrPortFrom(dst, dp), netip.AddrPortFrom(src, sp)}, 1
	default:
		pr.stats.Skipped++
		return
	}
	if ci.Timestamp.After(pr.now) {
		pr.now = ci.Timestamp
	}
	pr.sweep()

	el := pr.flows[key]
	if el == nil {
		if last, ok := pr.closed[key]; ok && !tcp.SYN && pr.now.Sub(last) < pr.idle {
			pr.stats.Late++
			return
		}
		delete(pr.closed, key)
		if pr.lru.Len() >= pr.maxFlows {
			pr.stats.Evicted++
			pr.finish(pr.lru.Back(), false)
		}
		fl := &pcapFlow{key: key, f: Flow{
			Start:  ci.Timestamp,
			Client: key.client.Addr(),
			Server: key.server.Addr(),
			Port:   key.server.Port(),
		}}
		el = pr.lru.PushFront(fl)
		pr.flows[key] = el
	} else {
		pr.lru.MoveToFront(el)
	}
	fl := el.Value.(*pcapFlow)
	if ci.Timestamp.After(fl.last) {
		fl.last = ci.Timestamp
	}
	if dir == 0 {
		fl.f.BytesOut += uint64(ipLen)
		fl.f.PacketsOut++
		fl.client(tcp)
	} else {
		fl.f.BytesIn += uint64(ipLen)
		fl.f.PacketsIn++
	}
	if tcp.FIN {
		fl.fin[dir] = tcp.Seq + uint32(len(tcp.Payload)) + 1
	}
	if tcp.ACK && fl.fin[1-dir] != 0 && int32(tcp.Ack-fl.fin[1-dir]) >= 0 {
		fl.finAckd[1-dir] = true
	}
	if tcp.RST || fl.finAckd[0] && fl.finAckd[1] {
		pr.finish(el, true)
	}
}

// client feeds a client-to-server segment to the ClientHello reassembly.
func (fl *pcapFlow) client(tcp *layers.TCP) {
	if fl.helloDone {
		return
	}
	if tcp.SYN {
		fl.base, fl.haveBase = tcp.Seq+1, true
		return
	}
	if len(tcp.Payload) == 0 {
		return
	}
	if !fl.haveBase {
		// The handshake was not captured: take the first data seen as
		// the start, which is right unless it came out of order.
		fl.base, fl.haveBase = tcp.Seq, true
	}
	off := int64(int32(tcp.Seq - fl.base))
	payload := tcp.Payload
	if off < 0 {
		if -off >= int64(len(payload)) {
			return // entirely before the start: a retransmitted SYN's data
		}
		payload, off = payload[-off:], 0
	}
	if off >= maxHelloBytes {
		return
	}
	if end := off + int64(len(payload)); end > maxHelloBytes {
		payload = payload[:maxHelloBytes-off]
	}
	if off > int64(len(fl.hello)) {
		if fl.pending == nil {
			fl.pending = make(map[uint32][]byte)
		}
		if len(fl.pending) < pcapMaxPending {
			if old := fl.pending[uint32(off)]; len(old) < len(payload) {
				fl.pending[uint32(off)] = slices.Clone(payload)
			}
		}
		return
	}
	fl.appendAt(int(off), payload)
	// Drain the pending segments the new bytes reach.
	for progress := true; progress && len(fl.pending) > 0; {
		progress = false
		for o, p := range fl.pending {
			if int(o) <= len(fl.hello) {
				fl.appendAt(int(o), p)
				delete(fl.pending, o)
				progress = true
			}
		}
	}
	sni, err := parseSNI(fl.hello)
	if errors.Is(err, errNeedMore) && len(fl.hello) < maxHelloBytes {
		return
	}
	if err == nil {
		fl.f.ServerName = sni
	}
	fl.helloDone, fl.hello, fl.pending = true, nil, nil
}

// appendAt adds the part of p, which starts at off, past what hello holds.
func (fl *pcapFlow) appendAt(off int, p []byte) {
	if skip := len(fl.hello) - off; skip < len(p) {
		fl.hello = append(fl.hello, p[skip:]...)
	}
}

// finish moves a tracked flow to the ready queue. Packets of its
// connection arriving later are counted as late, not as a new flow, if it
// closed.
func (pr *PCAPReader) finish(el *list.Element, closed bool) {
	fl := pr.lru.Remove(el).(*pcapFlow)
	delete(pr.flows, fl.key)
	fl.f.Duration = fl.last.Sub(fl.f.Start)
	pr.ready = append(pr.ready, fl.f)
	if closed {
		pr.closed[fl.key] = fl.last
		pr.closedQ = append(pr.closedQ, closedEntry{fl.key, fl.last})
		// Past the bound the oldest is forgotten (its late packets
		// would then start a flow); the queue's stale entries, of keys
		// reopened since, are bounded too.
		for len(pr.closed) > pr.maxFlows || len(pr.closedQ)-pr.closedHead > 2*pr.maxFlows {
			pr.popClosed()
		}
	}
}

// sweep ends the flows idle past pcapIdleTimeout, looking at most once per
// tenth of it so that the cost stays proportional to the packets.
func (pr *PCAPReader) sweep() {
	if pr.now.Sub(pr.swept) < pr.idle/10 {
		return
	}
	pr.swept = pr.now
	for el := pr.lru.Back(); el != nil; el = pr.lru.Back() {
		if pr.now.Sub(el.Value.(*pcapFlow).last) < pr.idle {
			break
		}
		pr.finish(el, false)
	}
	pr.expireClosed()
}

// expireClosed forgets the closed connections old enough that a packet of
// theirs is a new connection's.
func (pr *PCAPReader) expireClosed() {
	for pr.closedHead < len(pr.closedQ) && pr.now.Sub(pr.closedQ[pr.closedHead].last) >= pr.idle {
		pr.popClosed()
	}
}

// popClosed forgets the oldest closed connection. (Scanning the map for
// expired ones whenever it was full, as this reader once did, cost the
// whole map per connection closed once a trace had closed pcapMaxFlows
// within pcapIdleTimeout: a minute of a campus's HTTPS.)
func (pr *PCAPReader) popClosed() {
	e := pr.closedQ[pr.closedHead]
	pr.closedQ[pr.closedHead] = closedEntry{}
	pr.closedHead++
	if t, ok := pr.closed[e.key]; ok && t.Equal(e.last) {
		delete(pr.closed, e.key)
	}
	if pr.closedHead >= 1024 && pr.closedHead > len(pr.closedQ)/2 {
		pr.closedQ = append(pr.closedQ[:0], pr.closedQ[pr.closedHead:]...)
		pr.closedHead = 0
	}
}

// flush ends every tracked flow, at the end of the trace, in order of start.
func (pr *PCAPReader) flush() {
	n := len(pr.ready)
	for el := pr.lru.Back(); el != nil; el = pr.lru.Back() {
		pr.finish(el, false)
	}
	slices.SortStableFunc(pr.ready[n:], func(a, b Flow) int { return a.Start.Compare(b.Start) })
}

// cappedReader passes a pcapng stream through, block by block, refusing a
// packet block whose captured length is over pcapMaxCapture or past the
// block's end: pcapgo allocates a packet's buffer from its header alone, so
// a corrupt or hostile length would otherwise cost gigabytes.
type cappedReader struct {
	br   *bufio.Reader
	left int // bytes left of the current block
	big  bool
	// links are the link types of the section's interfaces, in order:
	// pcapgo's are truncated to a byte.
	links []uint16
}

// linkType returns the link type of interface i, or 0xffff if there is no
// such interface.
func (c *cappedReader) linkType(i int) uint16 {
	if i < 0 || i >= len(c.links) {
		return 0xffff
	}
	return c.links[i]
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		if err := c.block(); err != nil {
			return 0, err
		}
		if c.left == 0 {
			// A block header cut short: let pcapgo see the truncation.
			return c.br.Read(p)
		}
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= n
	return n, err
}

// block checks the header of the block that starts here and sets left.
func (c *cappedReader) block() error {
	hdr, err := c.br.Peek(12)
	if len(hdr) < 12 {
		if len(hdr) == 0 && err != nil {
			return err
		}
		return nil
	}
	u32 := func(b []byte) uint32 {
		if c.big {
			return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		}
		return uint32(b[3])<<24 | uint32(b[2])<<16 | uint32(b[1])<<8 | uint32(b[0])
	}
	if hdr[0] == 0x0a && hdr[1] == 0x0d && hdr[2] == 0x0d && hdr[3] == 0x0a {
		c.big = hdr[8] == 0x1a // byte-order magic 0x1A2B3C4D as written
		c.links = c.links[:0]  // a new section numbers its interfaces anew
	}
	typ, length := u32(hdr[0:4]), u32(hdr[4:8])
	if length < 12 || length%4 != 0 || length > 1<<30 {
		return fmt.Errorf("replay: pcapng block of %d bytes", length)
	}
	switch typ {
	case 1: // interface description: link type, reserved, snap length
		if c.big {
			c.links = append(c.links, uint16(hdr[8])<<8|uint16(hdr[9]))
		} else {
			c.links = append(c.links, uint16(hdr[9])<<8|uint16(hdr[8]))
		}
	case 2, 6: // packet, enhanced packet
		b, _ := c.br.Peek(24)
		if len(b) == 24 {
			if caplen := u32(b[20:24]); caplen > pcapMaxCapture || caplen > length-32 {
				return fmt.Errorf("replay: pcapng packet of %d captured bytes in a %d-byte block", caplen, length)
			}
		}
	case 3: // simple packet: pcapgo takes its original length as captured
		if orig := u32(hdr[8:12]); orig > pcapMaxCapture {
			return fmt.Errorf("replay: pcapng simple packet of %d bytes", orig)
		}
	}
	c.left = int(length)
	return nil
}
