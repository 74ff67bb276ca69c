package replay

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// serialize frames layers as the capture's bytes.
func serialize(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	for _, l := range ls {
		if tcp, ok := l.(*layers.TCP); ok {
			for _, n := range ls {
				if ip, ok := n.(gopacket.NetworkLayer); ok {
					tcp.SetNetworkLayerForChecksum(ip)
				}
			}
		}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPCAPSkipReasons checks that Stats says why packets made no flow: a
// link type the reader does not decode (named), packets that are not TCP,
// and packets cut short by the capture.
func TestPCAPSkipReasons(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	eth := func(typ layers.EthernetType) *layers.Ethernet {
		return &layers.Ethernet{SrcMAC: net2mac(1), DstMAC: net2mac(2), EthernetType: typ}
	}
	ip4 := func(p layers.IPProtocol) *layers.IPv4 {
		return &layers.IPv4{Version: 4, TTL: 64, Protocol: p, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{192, 0, 2, 1}}
	}
	tcp := func(flags string) *layers.TCP {
		return &layers.TCP{SrcPort: 40000, DstPort: 443, Seq: 1, Window: 65535, SYN: flags == "S", ACK: flags != "S", PSH: flags == "PA"}
	}
	write := func(t *testing.T, lt layers.LinkType, frames ...[]byte) []byte {
		var b bytes.Buffer
		w := pcapgo.NewWriterNanos(&b)
		if err := w.WriteFileHeader(65535, lt); err != nil {
			t.Fatal(err)
		}
		for i, f := range frames {
			ci := gopacket.CaptureInfo{Timestamp: t0.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(f), Length: len(f)}
			if len(f) > 0 && f[0] == 0xee { // marked: truncated to the bytes after the mark
				f = f[1:]
				ci.CaptureLength, ci.Length = len(f), len(f)+1000
			}
			if err := w.WritePacket(ci, f); err != nil {
				t.Fatal(err)
			}
		}
		return b.Bytes()
	}
	syn := serialize(t, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolTCP), tcp("S"))

	t.Run("link type", func(t *testing.T) {
		// 802.11 frames (a Wi-Fi monitor capture): three packets, no flows.
		trace := write(t, layers.LinkTypeIEEE802_11, syn, syn, syn)
		r := mustOpen(t, trace, FormatAuto)
		if fl := drainFlows(t, r); len(fl) != 0 {
			t.Fatalf("flows %+v", fl)
		}
		st := r.Stats()
		if st.Packets != 3 || st.OtherLink != 3 || st.OtherLinkType != "105 (802.11)" || st.NonTCP != 0 || st.Kept != 0 {
			t.Errorf("stats %+v", st)
		}
		// A link type past a byte, which gopacket cannot name.
		trace = write(t, layers.LinkTypeEthernet, syn)
		trace[20], trace[21] = 0x2c, 0x01 // 300, little-endian
		if st := statsOf(t, trace); st.OtherLink != 1 || st.OtherLinkType != "300" {
			t.Errorf("link type 300: stats %+v", st)
		}
	})
	t.Run("not TCP", func(t *testing.T) {
		arp := serialize(t, eth(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
			HwAddressSize: 6, ProtAddressSize: 4, Operation: 1, SourceHwAddress: net2mac(1), SourceProtAddress: []byte{10, 0, 0, 1},
			DstHwAddress: net2mac(0), DstProtAddress: []byte{10, 0, 0, 2}})
		udp := &layers.UDP{SrcPort: 5353, DstPort: 443}
		udp.SetNetworkLayerForChecksum(ip4(layers.IPProtocolUDP))
		quic := serialize(t, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolUDP), udp, gopacket.Payload("quic"))
		v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolICMPv6,
			SrcIP: netip.MustParseAddr("2001:db8::1").AsSlice(), DstIP: netip.MustParseAddr("2001:db8::2").AsSlice()}
		icmp := serialize(t, eth(layers.EthernetTypeIPv6), v6, gopacket.Payload{128, 0, 0, 0, 0, 0, 0, 0})
		st := statsOf(t, write(t, layers.LinkTypeEthernet, arp, quic, icmp, syn))
		if st.Packets != 4 || st.NonTCP != 3 || st.Kept != 1 || st.OtherLink != 0 || st.Malformed != 0 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		data := serialize(t, eth(layers.EthernetTypeIPv4), ip4(layers.IPProtocolTCP), tcp("PA"), gopacket.Payload(make([]byte, 1000)))
		// Captured to the end of its TCP header: still counted, in full.
		headers := append([]byte{0xee}, data[:14+20+20]...)
		// Captured into its TCP header: malformed as well.
		cut := append([]byte{0xee}, data[:14+20+8]...)
		r := mustOpen(t, write(t, layers.LinkTypeEthernet, syn, headers, cut), FormatAuto)
		fl := drainFlows(t, r)
		st := r.Stats()
		if st.Packets != 3 || st.Truncated != 2 || st.Malformed != 1 || len(fl) != 1 {
			t.Fatalf("stats %+v, flows %+v", st, fl)
		}
		if want := uint64(40 + 40 + 1000); fl[0].BytesOut != want || fl[0].PacketsOut != 2 {
			t.Errorf("flow %+v, want %d bytes in 2 packets", fl[0], want)
		}
	})
}

func statsOf(t *testing.T, trace []byte) Stats {
	t.Helper()
	r := mustOpen(t, trace, FormatAuto)
	drainFlows(t, r)
	return r.Stats()
}

// TestPCAPClosedBound checks the bound on the closed connections the
// reader remembers for their late packets: past it the oldest is
// forgotten, so a late packet of it starts a flow, while one of a
// connection still remembered is counted late.
func TestPCAPClosedBound(t *testing.T) {
	var b bytes.Buffer
	pw := pcapgo.NewWriter(&b)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	w := &traceWriter{t: t, lt: layers.LinkTypeEthernet, out: pw.WritePacket}
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	srv := netip.MustParseAddrPort("192.0.2.1:443")
	var clients []netip.AddrPort
	for i := range 3 {
		c := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + i)}), 40000)
		clients = append(clients, c)
		w.conn(t0.Add(time.Duration(i)*time.Second), c, srv, []byte("hello"), false, false, 10)
	}
	// The last ACK again, of the first connection and of the last.
	late := t0.Add(10 * time.Second)
	w.send(late, clients[0], srv, "A", 1000+1+5+1, 900000+1+10+1, nil)
	w.send(late, clients[2], srv, "A", 1000+1+5+1, 900000+1+10+1, nil)
	pr, err := OpenPCAP(bytes.NewReader(b.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pr.maxFlows = 2
	var got []netip.Addr
	for {
		f, err := pr.Next()
		if err != nil {
			break
		}
		got = append(got, f.Client)
	}
	want := []netip.Addr{clients[0].Addr(), clients[1].Addr(), clients[2].Addr(), clients[0].Addr()}
	if st := pr.packetStats(); !slices.Equal(got, want) || st.Late != 1 {
		t.Errorf("flows from %v, want %v; %d late, want 1", got, want, st.Late)
	}
}

// TestGeneratedCaptures reads the fixtures pkie replay gen wrote (the
// fuzz target's seeds):
//
//	pkie replay gen --flows 6 --duration 5s --seed 4 --format pcap --out gen-6.pcap
//	pkie replay gen --flows 6 --duration 5s --seed 4 --no-sni --format pcapng --out gen-6-nosni.pcapng
//
// six flows, one never answered (its SYNs alone, so no server name), the
// data packets captured to their headers.
func TestGeneratedCaptures(t *testing.T) {
	for _, tc := range []struct {
		file  string
		named int64
	}{{"gen-6.pcap", 5}, {"gen-6-nosni.pcapng", 0}} {
		r := openFixture(t, tc.file, FormatAuto, Options{})
		flows := drainFlows(t, r)
		st := r.Stats()
		if len(flows) != 6 || st.Named != tc.named || st.Packets != 64 || st.Truncated != 23 || st.Malformed != 0 || st.Late != 0 {
			t.Errorf("%s: %d flows, stats %+v", tc.file, len(flows), st)
		}
		unanswered := 0
		for _, f := range flows {
			if f.PacketsIn == 0 {
				unanswered++
				if f.ServerName != "" || f.BytesOut != 60*f.PacketsOut {
					t.Errorf("%s: unanswered flow %+v", tc.file, f)
				}
			} else if f.BytesIn < 112 || f.PacketsOut < 5 || (tc.named > 0) != (f.ServerName != "") {
				t.Errorf("%s: flow %+v", tc.file, f)
			}
		}
		if unanswered != 1 {
			t.Errorf("%s: %d unanswered flows, want 1", tc.file, unanswered)
		}
	}
}
