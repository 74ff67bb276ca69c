package gen

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/pkie/pkie/internal/replay"
)

// writeCapture writes flows in format and returns the file.
func writeCapture(t testing.TB, format string, flows []replay.Flow) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := NewWriter(format, &b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range flows {
		if err := w.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// record is a packet as the file holds it.
type record struct {
	ci   gopacket.CaptureInfo
	data []byte
}

func records(t testing.TB, file []byte) []record {
	t.Helper()
	var src interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	}
	var err error
	if bytes.HasPrefix(file, []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
		src, err = pcapgo.NewNgReader(bytes.NewReader(file), pcapgo.DefaultNgReaderOptions)
	} else {
		src, err = pcapgo.NewReader(bytes.NewReader(file))
	}
	if err != nil {
		t.Fatal(err)
	}
	var rs []record
	for {
		data, ci, err := src.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return rs
		}
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, record{ci, data})
	}
}

func byStart(a, b replay.Flow) int {
	return cmp.Or(a.Start.Compare(b.Start), a.Client.Compare(b.Client), a.Server.Compare(b.Server), cmp.Compare(a.Duration, b.Duration))
}

// TestPCAPRoundTrip writes the generator's flows as pcap and pcapng and
// reads them back through replay.Open: every flow comes back with its
// client, server, port, server name (unless it was never answered: no
// handshake, no ClientHello), start and duration to the nanosecond, and
// its bytes each way unless they were fewer than its handshake's and
// close's packets take. The reader's counts agree with the file.
func TestPCAPRoundTrip(t *testing.T) {
	o := small()
	o.Flows = 1500
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	want := drain(t, g)
	hellos := newHelloCache(1 << 20)
	for _, format := range []string{replay.FormatPCAP, FormatPCAPNG} {
		t.Run(format, func(t *testing.T) {
			file := writeCapture(t, format, want)
			// Two writers, each making its ClientHellos anew.
			if a, b := writeCapture(t, format, want[:200]), writeCapture(t, format, want[:200]); !bytes.Equal(a, b) {
				t.Fatal("the same flows made different files")
			}
			r, err := replay.Open(bytes.NewReader(file), replay.FormatAuto, replay.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []replay.Flow
			for {
				f, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, f)
			}
			if len(got) != len(want) {
				t.Fatalf("read %d flows, wrote %d", len(got), len(want))
			}
			slices.SortFunc(got, byStart)
			exp := slices.Clone(want)
			slices.SortFunc(exp, byStart)
			var named, exact int
			for i, w := range exp {
				g := got[i]
				if w.PacketsIn == 0 {
					w.ServerName = ""
					if g.BytesOut != 60*w.PacketsOut || g.PacketsOut != w.PacketsOut || g.BytesIn != 0 || g.PacketsIn != 0 {
						t.Errorf("unanswered flow %d: read %+v, wrote %+v", i, g, w)
					}
				} else {
					hello, err := hellos.get(w.ServerName)
					if err != nil {
						t.Fatal(err)
					}
					segs := (len(hello) + pcapMSS - 1) / pcapMSS
					minOut := uint64(60 + 52 + 52*segs + len(hello) + 2*52)
					if g.BytesOut != max(w.BytesOut, minOut) || g.BytesIn != max(w.BytesIn, 60+52) {
						t.Errorf("flow %d: read %d bytes out, %d in; wrote %d, %d (at least %d out)", i, g.BytesOut, g.BytesIn, w.BytesOut, w.BytesIn, minOut)
					}
					if g.BytesOut == w.BytesOut && g.BytesIn == w.BytesIn {
						exact++
					}
					if g.PacketsOut < uint64(4+segs) || g.PacketsIn < 2 {
						t.Errorf("flow %d: %d packets out, %d in", i, g.PacketsOut, g.PacketsIn)
					}
					if w.ServerName != "" {
						named++
					}
				}
				if g.Start != w.Start || g.Duration != w.Duration || g.Client != w.Client || g.Server != w.Server || g.Port != w.Port || g.ServerName != w.ServerName {
					t.Errorf("flow %d:\nread  %+v\nwrote %+v", i, g, w)
				}
			}
			t.Logf("%d flows, %d named, %d with their bytes exactly, %d bytes of capture", len(got), named, exact, len(file))
			if exact < len(want)/2 {
				t.Errorf("only %d flows of %d have their bytes exactly", exact, len(want))
			}

			rs := records(t, file)
			var truncated int64
			for i, rec := range rs {
				if rec.ci.CaptureLength < rec.ci.Length {
					truncated++
				}
				if i > 0 && rec.ci.Timestamp.Before(rs[i-1].ci.Timestamp) {
					t.Fatalf("packet %d at %s, after one at %s", i, rec.ci.Timestamp, rs[i-1].ci.Timestamp)
				}
			}
			st := r.Stats()
			if st.Kept != int64(len(want)) || st.Named != int64(named) || st.Packets != int64(len(rs)) || st.Truncated != truncated ||
				st.Malformed != 0 || st.Late != 0 || st.Evicted != 0 || st.NonTCP != 0 || st.OtherLink != 0 {
				t.Errorf("stats %+v; the file has %d packets, %d truncated; %d named flows", st, len(rs), truncated, named)
			}
		})
	}
}

// TestPCAPPackets checks the frames against gopacket's: every header
// decodes, its checksums are what gopacket computes for the packet on the
// wire (a truncated packet's payload taken as zeros), the captured ones
// are whole, and each side's sequence numbers run on without a gap.
func TestPCAPPackets(t *testing.T) {
	o := small()
	o.Flows = 150
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	file := writeCapture(t, replay.FormatPCAP, drain(t, g))
	next := map[[2]netip.AddrPort]uint32{}
	var whole, cut, syns int
	for i, rec := range records(t, file) {
		pkt := gopacket.NewPacket(rec.data, layers.LinkTypeEthernet, gopacket.Default)
		ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ip == nil || tcp == nil {
			t.Fatalf("packet %d: %v", i, pkt)
		}
		if rec.ci.Length != 14+int(ip.Length) {
			t.Fatalf("packet %d: original length %d, IP length %d", i, rec.ci.Length, ip.Length)
		}
		payload := len(tcp.Payload)
		if rec.ci.CaptureLength < rec.ci.Length {
			cut++
			if payload != 0 {
				t.Fatalf("packet %d: truncated with %d bytes of payload", i, payload)
			}
			payload = int(ip.Length) - 20 - len(tcp.Contents)
		} else {
			whole++
		}
		// gopacket's checksums of the same headers over a zero payload of
		// the same length.
		ip2, tcp2 := *ip, *tcp
		tcp2.SetNetworkLayerForChecksum(&ip2)
		buf := gopacket.NewSerializeBuffer()
		pl := tcp.Payload
		if rec.ci.CaptureLength < rec.ci.Length {
			pl = make([]byte, payload)
		}
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, &ip2, &tcp2, gopacket.Payload(pl)); err != nil {
			t.Fatal(err)
		}
		ref := buf.Bytes()
		if got, want := binary.BigEndian.Uint16(rec.data[14+10:]), binary.BigEndian.Uint16(ref[10:]); got != want {
			t.Fatalf("packet %d: IP checksum %#x, gopacket's %#x", i, got, want)
		}
		if got, want := tcp.Checksum, binary.BigEndian.Uint16(ref[20+16:]); got != want {
			t.Fatalf("packet %d: TCP checksum %#x, gopacket's %#x", i, got, want)
		}
		src, _ := netip.AddrFromSlice(ip.SrcIP)
		dst, _ := netip.AddrFromSlice(ip.DstIP)
		k := [2]netip.AddrPort{netip.AddrPortFrom(src, uint16(tcp.SrcPort)), netip.AddrPortFrom(dst, uint16(tcp.DstPort))}
		if tcp.SYN {
			syns++
			next[k] = tcp.Seq + 1
			continue
		}
		if n, ok := next[k]; !ok || tcp.Seq != n {
			t.Fatalf("packet %d: seq %d, want %d (%v)", i, tcp.Seq, n, ok)
		}
		next[k] = tcp.Seq + uint32(payload)
		if tcp.FIN {
			next[k]++
		}
	}
	if whole == 0 || cut == 0 || syns == 0 {
		t.Errorf("%d whole packets, %d truncated, %d SYNs", whole, cut, syns)
	}
}

// TestClientHello checks that the ClientHellos are crypto/tls's, the same
// for the same name, and that a crypto/tls server reads them for the name.
func TestClientHello(t *testing.T) {
	for _, name := range []string{"www.bluefield12.com", ""} {
		h1, err := clientHello(name)
		if err != nil {
			t.Fatal(err)
		}
		h2, _ := clientHello(name)
		if !bytes.Equal(h1, h2) {
			t.Errorf("%q: two different ClientHellos", name)
		}
		c, s := net.Pipe()
		seen := make(chan *tls.ClientHelloInfo, 1)
		go func() {
			defer s.Close()
			tls.Server(s, &tls.Config{GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
				seen <- hi
				return nil, errors.New("enough")
			}}).Handshake()
		}()
		c.Write(h1)
		io.Copy(io.Discard, c)
		c.Close()
		hi := <-seen
		if hi.ServerName != name || !slices.Equal(hi.SupportedProtos, []string{"h2", "http/1.1"}) ||
			!slices.Contains(hi.SupportedCurves, tls.X25519MLKEM768) || !slices.Contains(hi.SupportedVersions, tls.VersionTLS13) {
			t.Errorf("%q: crypto/tls read %+v", name, hi)
		}
		if other, _ := clientHello("other.example"); bytes.Equal(other[11:43], h1[11:43]) {
			t.Errorf("%q: the same random as another name's", name)
		}
	}
}

// TestPCAPOrder checks that flows out of order of start are refused
// rather than written with packets out of time order.
func TestPCAPOrder(t *testing.T) {
	t0 := time.Date(2013, 4, 21, 17, 0, 0, 0, time.UTC)
	f := replay.Flow{Start: t0.Add(time.Second), Client: mustAddr("10.0.0.1"), Server: mustAddr("198.18.0.1"), Port: 443, PacketsOut: 1, BytesOut: 60}
	w, _ := NewWriter(replay.FormatPCAP, io.Discard, nil)
	if err := w.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Start = t0
	if err := w.Write(f); err == nil {
		t.Error("a flow starting before the last one was written")
	}
	w, _ = NewWriter(replay.FormatPCAP, io.Discard, nil)
	f.Client, f.Server = mustAddr("2001:db8::1"), mustAddr("2001:db8::2")
	if err := w.Write(f); err == nil {
		t.Error("an IPv6 flow was written")
	}
}

// TestPCAPPorts writes many connections of one client to one server,
// overlapping or never answered (which a reader holds open for 5
// minutes): each must stay its own flow, so no two may share a client
// port while a reader could take them for one connection.
func TestPCAPPorts(t *testing.T) {
	t0 := time.Date(2013, 4, 21, 17, 0, 0, 0, time.UTC)
	var flows []replay.Flow
	for i := range 1500 {
		f := replay.Flow{Start: t0.Add(time.Duration(i) * 100 * time.Millisecond), Client: mustAddr("10.0.0.1"), Server: mustAddr("198.18.0.1"), Port: 443, ServerName: "a.example"}
		if i%2 == 0 {
			f.PacketsOut, f.BytesOut, f.Duration = 3, 180, 3*time.Second
		} else {
			f.PacketsOut, f.BytesOut, f.PacketsIn, f.BytesIn, f.Duration = 10, 5000, 20, 30000, 20*time.Second
		}
		flows = append(flows, f)
	}
	r, err := replay.Open(bytes.NewReader(writeCapture(t, replay.FormatPCAP, flows)), replay.FormatAuto, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		f, err := r.Next()
		if err != nil {
			break
		}
		if f.PacketsIn == 0 && f.PacketsOut != 3 || f.PacketsIn > 0 && f.Duration != 20*time.Second {
			t.Errorf("flow %+v: two connections in one", f)
		}
		n++
	}
	if st := r.Stats(); n != len(flows) || st.Late != 0 {
		t.Errorf("%d flows read of %d; stats %+v", n, len(flows), st)
	}
}

// TestPCAPThroughNfpcapd reads the generated capture with the real tools,
// nfpcapd and nfdump (nfdump 1.7.1), as a user checking pkie against them
// would: every flow must have the bytes and packets pkie's reader finds,
// each way, which says the truncated packets' IP lengths are read as the
// tools read a real capture's.
func TestPCAPThroughNfpcapd(t *testing.T) {
	for _, tool := range []string{"nfpcapd", "nfdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian: apt-get install nfdump): the real-tool test is skipped", tool)
		}
	}
	o := small()
	o.Flows, o.Duration = 300, 20*time.Second
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	file := writeCapture(t, replay.FormatPCAP, drain(t, g))
	dir := t.TempDir()
	trace, flowDir := filepath.Join(dir, "t.pcap"), filepath.Join(dir, "flows")
	if err := os.WriteFile(trace, file, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(flowDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "nfpcapd", "-r", trace, "-w", flowDir).CombinedOutput(); err != nil {
		t.Fatalf("nfpcapd: %v: %s", err, out)
	}
	cmd := exec.CommandContext(ctx, "nfdump", "-R", flowDir, "-B", "-o", "csv")
	cmd.Env = append(os.Environ(), "TZ=UTC")
	csv, err := cmd.Output()
	if err != nil {
		t.Fatalf("nfdump: %v", err)
	}
	type counts struct {
		client, server                   netip.Addr
		start                            time.Time
		bytesOut, bytesIn, pktOut, pktIn uint64
	}
	read := func(b []byte, format string) []counts {
		r, err := replay.Open(bytes.NewReader(b), format, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var cs []counts
		for {
			f, err := r.Next()
			if err != nil {
				break
			}
			// nfdump prints the start to the second.
			cs = append(cs, counts{f.Client, f.Server, f.Start.Truncate(time.Second), f.BytesOut, f.BytesIn, f.PacketsOut, f.PacketsIn})
		}
		slices.SortFunc(cs, func(a, b counts) int {
			return cmp.Or(a.start.Compare(b.start), a.client.Compare(b.client), a.server.Compare(b.server), cmp.Compare(a.bytesOut, b.bytesOut))
		})
		return cs
	}
	pkie, nf := read(file, replay.FormatPCAP), read(csv, replay.FormatNfdump)
	if int64(len(pkie)) != o.Flows || !slices.Equal(pkie, nf) {
		t.Errorf("pkie read %d flows, nfdump %d; they differ:\npkie   %+v\nnfdump %+v", len(pkie), len(nf), pkie[:min(3, len(pkie))], nf[:min(3, len(nf))])
	}
}

// TestPCAPStreaming checks that the writer holds only the flows in
// progress: after each flow, those written before it that end after it
// starts, and itself.
func TestPCAPStreaming(t *testing.T) {
	o := small()
	o.Flows = 2000
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	flows := drain(t, g)
	w, err := newPCAPWriter(io.Discard, false)
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for i, f := range flows {
		if err := w.Write(f); err != nil {
			t.Fatal(err)
		}
		want := 1
		for _, e := range flows[:i] {
			if e.Start.Add(e.Duration).After(f.Start) {
				want++
			}
		}
		if len(w.flows) != want {
			t.Fatalf("flow %d: %d flows held, %d in progress", i, len(w.flows), want)
		}
		most = max(most, want)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(w.flows) != 0 || most >= len(flows)/2 {
		t.Errorf("%d flows held after Close; at most %d of %d at once", len(w.flows), most, len(flows))
	}
}
