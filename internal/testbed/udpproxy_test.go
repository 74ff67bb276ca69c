package testbed

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// quicEcho is a QUIC server on loopback that echoes every stream back.
type quicEcho struct {
	ln     *quic.Listener
	client *tls.Config
}

func startQUICEcho(t *testing.T) *quicEcho {
	t.Helper()
	root, err := NewRootCA("udp proxy test root", ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := root.Issue(LeafOptions{DNSNames: []string{"echo.test"}})
	if err != nil {
		t.Fatal(err)
	}
	srvTLS := &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}, NextProtos: []string{"echo"}}
	ln, err := quic.ListenAddr("127.0.0.1:0", srvTLS, &quic.Config{MaxIdleTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go func() {
				for {
					st, err := c.AcceptStream(context.Background())
					if err != nil {
						return
					}
					go func() {
						io.Copy(st, st)
						st.Close()
					}()
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return &quicEcho{ln: ln, client: &tls.Config{RootCAs: root.Pool(), ServerName: "echo.test", NextProtos: []string{"echo"}}}
}

func (e *quicEcho) addr() string { return e.ln.Addr().String() }

// echoRounds writes n messages of size bytes on st, each different, and
// reads each one back before the next.
func echoRounds(st *quic.Stream, n, size int, deadline time.Time) error {
	st.SetDeadline(deadline)
	msg := make([]byte, size)
	got := make([]byte, size)
	for i := range n {
		for j := range msg {
			msg[j] = byte(i*7 + j)
		}
		if _, err := st.Write(msg); err != nil {
			return err
		}
		if _, err := io.ReadFull(st, got); err != nil {
			return err
		}
		if !bytes.Equal(got, msg) {
			return errors.New("echo differs from what was sent")
		}
	}
	return nil
}

func checkAddsUp(t *testing.T, s UDPStats) {
	t.Helper()
	for name, d := range map[string]UDPDirStats{"to server": s.ToServer, "to client": s.ToClient} {
		if d.Received != d.Forwarded+d.Dropped {
			t.Errorf("%s: received %d != forwarded %d + dropped %d", name, d.Received, d.Forwarded, d.Dropped)
		}
		if d.Blocked > d.Dropped {
			t.Errorf("%s: blocked %d > dropped %d", name, d.Blocked, d.Dropped)
		}
	}
}

func TestUDPProxyQUICUnderLoss(t *testing.T) {
	echo := startQUICEcho(t)
	p, err := StartUDPProxy(echo.addr(), UDPProxyConfig{Delay: time.Millisecond, LossToServer: 0.2, LossToClient: 0.2, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Generous timeouts: a lost handshake packet costs a probe timeout,
	// and a loaded machine stretches those.
	qc := &quic.Config{HandshakeIdleTimeout: 30 * time.Second, MaxIdleTimeout: 30 * time.Second}
	c, err := quic.DialAddr(ctx, p.Addr.String(), echo.client, qc)
	if err != nil {
		t.Fatalf("QUIC handshake through 20%% loss: %v", err)
	}
	st, err := c.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := echoRounds(st, 40, 3000, time.Now().Add(50*time.Second)); err != nil {
		t.Fatalf("echo through 20%% loss: %v", err)
	}
	if n := p.Flows(); n != 1 {
		t.Errorf("flows = %d, want 1 (one client 4-tuple)", n)
	}
	c.CloseWithError(0, "")
	p.Close()
	s := p.Stats()
	checkAddsUp(t, s)
	for name, d := range map[string]UDPDirStats{"to server": s.ToServer, "to client": s.ToClient} {
		if d.Received < 40 {
			t.Errorf("%s: only %d datagrams", name, d.Received)
			continue
		}
		// 40 round trips of 3000 bytes are well over 100 datagrams each
		// way; 20% of them dropped, give or take.
		if f := float64(d.Dropped) / float64(d.Received); f < 0.05 || f > 0.45 {
			t.Errorf("%s: dropped %d of %d (%.2f), want about 0.2", name, d.Dropped, d.Received, f)
		}
		if d.Blocked != 0 {
			t.Errorf("%s: %d blocked while not blocking", name, d.Blocked)
		}
	}
}

func TestUDPProxyBlock(t *testing.T) {
	echo := startQUICEcho(t)
	p, err := StartUDPProxy(echo.addr(), UDPProxyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	qc := &quic.Config{HandshakeIdleTimeout: 20 * time.Second, MaxIdleTimeout: 30 * time.Second}
	c, err := quic.DialAddr(ctx, p.Addr.String(), echo.client, qc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	st, err := c.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := echoRounds(st, 3, 100, time.Now().Add(20*time.Second)); err != nil {
		t.Fatalf("echo before blocking: %v", err)
	}

	p.Block(true)
	// An established connection gets nothing through...
	msg := []byte("sent while blocked")
	st.SetDeadline(time.Now().Add(time.Second))
	if _, err := st.Write(msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(st, buf); err == nil {
		t.Fatal("echo came back while UDP was blocked")
	}
	// ...and a new one cannot be made.
	short := &quic.Config{HandshakeIdleTimeout: 500 * time.Millisecond}
	if c2, err := quic.DialAddr(ctx, p.Addr.String(), echo.client, short); err == nil {
		c2.CloseWithError(0, "")
		t.Fatal("QUIC handshake succeeded while UDP was blocked")
	}
	before := p.Stats()
	if before.ToServer.Blocked == 0 {
		t.Error("nothing counted as blocked to the server")
	}

	// Unblocked, QUIC retransmits what was lost and the echo arrives.
	p.Block(false)
	st.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(st, buf); err != nil {
		t.Fatalf("echo after unblocking: %v", err)
	}
	if !bytes.Equal(buf, msg) {
		t.Fatalf("echo after unblocking = %q", buf)
	}
	after := p.Stats()
	if after.ToServer.Forwarded <= before.ToServer.Forwarded || after.ToClient.Forwarded <= before.ToClient.Forwarded {
		t.Errorf("nothing forwarded after unblocking: %+v then %+v", before, after)
	}
	c.CloseWithError(0, "")
	p.Close()
	checkAddsUp(t, p.Stats())
}

// lossRun sends n numbered datagrams one at a time through a proxy in front
// of a UDP echo server, and returns the numbers that reached the server and
// those whose echo came back. One datagram at a time, waiting on the
// proxy's counters, so no socket buffer ever overflows and the only losses
// are the proxy's.
func lossRun(t *testing.T, seed uint64, n int) (atServer, back []uint32, s UDPStats) {
	t.Helper()
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	got := make(chan uint32, n)
	go func() {
		buf := make([]byte, 64)
		for {
			m, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				close(got)
				return
			}
			got <- binary.BigEndian.Uint32(buf[:m])
			srv.WriteToUDPAddrPort(buf[:m], from)
		}
	}()
	p, err := StartUDPProxy(srv.LocalAddr().String(), UDPProxyConfig{LossToServer: 0.3, LossToClient: 0.3, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cl, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(p.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	wait := func(cond func(UDPStats) bool) UDPStats {
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := p.Stats()
			if cond(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("proxy stuck at %+v", s)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	var b [4]byte
	for i := range n {
		binary.BigEndian.PutUint32(b[:], uint32(i))
		if _, err := cl.Write(b[:]); err != nil {
			t.Fatal(err)
		}
		prev := s.ToClient.Forwarded
		s = wait(func(s UDPStats) bool {
			return s.ToServer.Forwarded+s.ToServer.Dropped == uint64(i+1) &&
				s.ToClient.Received == s.ToServer.Forwarded &&
				s.ToClient.Forwarded+s.ToClient.Dropped == s.ToClient.Received
		})
		if s.ToServer.Forwarded > uint64(len(atServer)) {
			atServer = append(atServer, <-got)
		}
		if s.ToClient.Forwarded > prev {
			cl.SetReadDeadline(time.Now().Add(10 * time.Second))
			var e [4]byte
			if _, err := cl.Read(e[:]); err != nil {
				t.Fatalf("echo forwarded but not received: %v", err)
			}
			back = append(back, binary.BigEndian.Uint32(e[:]))
		}
	}
	return atServer, back, s
}

func TestUDPProxyLossIsSeeded(t *testing.T) {
	const n = 300
	s1, b1, st := lossRun(t, 1, n)
	s2, b2, _ := lossRun(t, 1, n)
	s3, b3, _ := lossRun(t, 2, n)
	if !slices.Equal(s1, s2) || !slices.Equal(b1, b2) {
		t.Error("the same seed lost different datagrams")
	}
	if slices.Equal(s1, s3) && slices.Equal(b1, b3) {
		t.Error("different seeds lost the same datagrams")
	}
	checkAddsUp(t, st)
	if st.ToServer.Received != n || st.ToServer.Forwarded != uint64(len(s1)) || st.ToClient.Forwarded != uint64(len(b1)) {
		t.Errorf("counters %+v disagree with %d sent, %d at server, %d back", st, n, len(s1), len(b1))
	}
	// 0.3 each way: about 70% reach the server, about 49% come back.
	if f := float64(len(s1)) / n; f < 0.6 || f > 0.8 {
		t.Errorf("%.2f reached the server, want about 0.7", f)
	}
	if f := float64(len(b1)) / n; f < 0.39 || f > 0.59 {
		t.Errorf("%.2f came back, want about 0.49", f)
	}
	// What came back is a subset of what arrived, in order.
	j := 0
	for _, x := range b1 {
		for j < len(s1) && s1[j] != x {
			j++
		}
		if j == len(s1) {
			t.Fatalf("echo %d came back but never reached the server, or out of order", x)
		}
	}
}

func TestUDPProxyDelay(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			m, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:m], from)
		}
	}()
	const d = 15 * time.Millisecond
	p, err := StartUDPProxy(srv.LocalAddr().String(), UDPProxyConfig{Delay: d})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cl, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(p.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 3 {
		start := time.Now()
		cl.Write([]byte{byte(i)})
		cl.SetReadDeadline(time.Now().Add(10 * time.Second))
		var b [1]byte
		if _, err := cl.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		if b[0] != byte(i) {
			t.Fatalf("echo %d, want %d", b[0], i)
		}
		// A lower bound only: the proxy must never deliver early.
		if rtt := time.Since(start); rtt < 2*d {
			t.Errorf("round trip %v, under the added %v", rtt, 2*d)
		}
	}
}

func TestUDPProxyBounds(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p, err := StartUDPProxy(srv.LocalAddr().String(), UDPProxyConfig{MaxFlows: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		cl, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(p.Addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		cl.Write([]byte{byte(i)})
	}
	srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := srv.Read(b[:]); err != nil || b[0] != 0 {
		t.Fatalf("first client's datagram: %v %v", b, err)
	}
	for deadline := time.Now().Add(10 * time.Second); p.Stats().ToServer.Received < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the second client's datagram never reached the proxy")
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	s := p.Stats()
	checkAddsUp(t, s)
	if s.ToServer.Received != 2 || s.ToServer.Forwarded != 1 || s.ToServer.Dropped != 1 {
		t.Errorf("with one flow allowed, two clients: %+v", s.ToServer)
	}
	if _, err := StartUDPProxy(srv.LocalAddr().String(), UDPProxyConfig{LossToClient: 1.5}); err == nil {
		t.Error("loss 1.5 accepted")
	}
}

// TestUDPProxyFlowDelay gives the first flow a short delay and the second a
// long one: each round trip is at least its own flow's, and the near flow
// is not held up behind the far one's datagrams.
func TestUDPProxyFlowDelay(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			m, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:m], from)
		}
	}()
	delays := []time.Duration{5 * time.Millisecond, 500 * time.Millisecond}
	p, err := StartUDPProxy(srv.LocalAddr().String(), UDPProxyConfig{Delay: time.Hour,
		FlowDelay: func(_ netip.AddrPort, rank int) time.Duration { return delays[min(rank, 1)] }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var cls []*net.UDPConn
	for range delays {
		cl, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(p.Addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		cls = append(cls, cl)
	}
	echo := func(cl *net.UDPConn, b byte) time.Duration {
		start := time.Now()
		cl.Write([]byte{b})
		cl.SetReadDeadline(time.Now().Add(10 * time.Second))
		var got [1]byte
		if _, err := cl.Read(got[:]); err != nil {
			t.Fatal(err)
		}
		if got[0] != b {
			t.Fatalf("echo %d, want %d", got[0], b)
		}
		return time.Since(start)
	}
	// Open the flows in rank order.
	if rtt := echo(cls[0], 1); rtt < 2*delays[0] {
		t.Errorf("first flow: round trip %v, under its %v", rtt, 2*delays[0])
	}
	far := make(chan time.Duration, 1)
	go func() { far <- echo(cls[1], 2) }()
	// While the far flow's datagram waits its 500 ms, the near flow's
	// round trips go through at their own pace: well under the far one.
	time.Sleep(20 * time.Millisecond)
	if rtt := echo(cls[0], 3); rtt < 2*delays[0] || rtt >= delays[1] {
		t.Errorf("near flow behind a far one: round trip %v, want at least %v and well under %v", rtt, 2*delays[0], delays[1])
	}
	if rtt := <-far; rtt < 2*delays[1] {
		t.Errorf("second flow: round trip %v, under its %v", rtt, 2*delays[1])
	}
	// Received, not Forwarded: the echo can arrive before the proxy
	// counts its write.
	if s := p.Stats(); s.ToServer.Received != 3 || s.ToClient.Received != 3 || s.ToServer.Dropped+s.ToClient.Dropped != 0 {
		t.Errorf("stats %+v: want 3 datagrams each way, none dropped", s)
	}
}
