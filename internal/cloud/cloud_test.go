package cloud

import (
	"context"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

const (
	idFast = pkie.PrivateUseMin + 1
	idSlow = pkie.PrivateUseMin + 2
)

var transports = []string{pecwire.QUIC, pecwire.TCP}

// TestRegisterPingProve registers over each transport, checks the
// keepalive exchange and proves one client-only submission end to end: the
// proof that arrives verifies under the prover's key for the chain and
// parameters submitted.
func TestRegisterPingProve(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			s := newSigner(idFast)
			tc := startCloud(t, Config{Provers: []pkie.Prover{s}, Keepalive: 7 * time.Second, MaxFrame: 40000})
			c, id := tc.register(t, tr)
			if id == (pecwire.ClientID{}) {
				t.Fatal("zero client id")
			}
			if got := tc.Clients(); got != 1 {
				t.Fatalf("%d clients registered, want 1", got)
			}
			send(t, c, &pecwire.Ping{Seq: 42})
			if p := recvAs[*pecwire.Pong](t, c); p.Seq != 42 {
				t.Fatalf("pong %d, want 42", p.Seq)
			}
			chain := testChain(t, "example.com")
			nonce := pecwire.Nonce{1, 2, 3, 4, 5, 6, 7, 8}
			send(t, c, &pecwire.Submit{
				ClientID: id, Nonce: nonce, Budget: 5 * time.Second, ServerName: "Example.COM", Port: 443,
				Requests: []pkie.Request{{ID: idFast, Params: []byte("p")}}, Chain: chain,
			})
			p := recvAs[*pecwire.Proof](t, c)
			if p.ClientID != id || p.Nonce != nonce || p.ID != idFast || p.Status != pecwire.ProofOK {
				t.Fatalf("proof message %+v", p)
			}
			// The server name reaches provers lower-cased, as SNI compares.
			sub := &pkie.Subject{ServerName: "example.com", Port: 443, Chain: chain}
			if err := s.verify(sub, []byte("p"), p.Proof); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRegisteredAnnouncesBounds checks that Registered carries the
// keepalive interval and frame limit the cloud enforces.
func TestRegisteredAnnouncesBounds(t *testing.T) {
	tc := startCloud(t, Config{Keepalive: 7 * time.Second, MaxFrame: 40000})
	for _, tr := range transports {
		c := tc.dial(t, tr)
		send(t, c, &pecwire.Register{Version: pecwire.Version})
		r := recvAs[*pecwire.Registered](t, c)
		if r.Version != pecwire.Version || r.Keepalive != 7*time.Second || r.MaxFrame != 40000 {
			t.Errorf("%s: registered %+v", tr, r)
		}
	}
}

// TestManyClients: clients on both transports submit concurrently, through
// their own sessions and through a shared submitter, and every outcome
// reaches the right client with a proof about the right chain.
func TestManyClients(t *testing.T) {
	s := newSigner(idFast)
	tc := startCloud(t, Config{Provers: []pkie.Prover{s}})
	const clients, each = 12, 8
	server := tc.dial(t, pecwire.TCP)
	var smu sync.Mutex
	errs := make(chan error, clients)
	for i := range clients {
		tr := transports[i%2]
		c, id := tc.register(t, tr)
		mt := newMinter(t, c)
		chains := map[pecwire.Nonce][][]byte{}
		for j := range each {
			chains[pecwire.Nonce{byte(i), byte(j), 1}] = testChain(t, "example.com")
		}
		go func() {
			errs <- func() error {
				for j := range each {
					n := pecwire.Nonce{byte(i), byte(j), 1}
					m := submitFor(id, n, chains[n], 10*time.Second, idFast)
					if j%2 == 0 {
						if err := c.Send(m, time.Now().Add(10*time.Second)); err != nil {
							return err
						}
					} else {
						smu.Lock()
						err := server.Send(mt.forward(m), time.Now().Add(10*time.Second))
						smu.Unlock()
						if err != nil {
							return err
						}
					}
				}
				for range each {
					m, err := c.Recv(time.Now().Add(20 * time.Second))
					if err != nil {
						return err
					}
					p, ok := m.(*pecwire.Proof)
					if !ok || p.ClientID != id || p.Status != pecwire.ProofOK || chains[p.Nonce] == nil {
						return fmt.Errorf("client %d got %+v", i, m)
					}
					if err := s.verify(&pkie.Subject{ServerName: "example.com", Port: 443, Chain: chains[p.Nonce]}, nil, p.Proof); err != nil {
						return err
					}
					delete(chains, p.Nonce)
				}
				return nil
			}()
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := s.calls.Load(); n != clients*each {
		t.Fatalf("%d prover calls, want %d", n, clients*each)
	}
}

// BenchmarkProveQUIC measures submissions proved per second for one client
// over QUIC on loopback, 256 in flight, with the tests' prover (one
// Ed25519 signature per proof): the cloud's cost per submission (framing,
// parsing the chain, scheduling, pushing) plus that signature.
func BenchmarkProveQUIC(b *testing.B) {
	tc := startCloud(b, Config{Provers: []pkie.Prover{newSigner(idFast)}, MaxJobs: 1 << 16, MaxJobsPerAddr: 1 << 16, MaxJobsPerClient: 1 << 16, MaxPending: 1 << 12})
	c, id := tc.register(b, pecwire.QUIC)
	chain := testChain(b, "example.com")
	const window = 256
	b.ResetTimer()
	sent := 0
	for got := 0; got < b.N; got++ {
		for sent < b.N && sent-got < window {
			n := pecwire.Nonce{}
			binary.BigEndian.PutUint64(n[:], uint64(sent))
			if err := c.Send(submitFor(id, n, chain, 10*time.Second, idFast), time.Now().Add(10*time.Second)); err != nil {
				b.Fatal(err)
			}
			sent++
		}
		if p := recvAs[*pecwire.Proof](b, c); p.Status != pecwire.ProofOK {
			b.Fatal(p.Status)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proofs/s")
}

// TestParamsPerEnhancement: each prover sees the parameters of its own
// request and the submission's subject, nothing of another's.
func TestParamsPerEnhancement(t *testing.T) {
	a, b := newSigner(idFast), newSigner(idSlow)
	tc := startCloud(t, Config{Provers: []pkie.Prover{a, b}})
	for _, tr := range transports {
		c, id := tc.register(t, tr)
		chain := testChain(t, "example.com")
		send(t, c, &pecwire.Submit{ClientID: id, Nonce: pecwire.Nonce{9}, Budget: 5 * time.Second, ServerName: "example.com", Port: 8443,
			Requests: []pkie.Request{{ID: idFast, Params: []byte("for a")}, {ID: idSlow, Params: []byte("for b")}}, Chain: chain})
		sub := &pkie.Subject{ServerName: "example.com", Port: 8443, Chain: chain}
		for range 2 {
			p := recvAs[*pecwire.Proof](t, c)
			s, params := a, "for a"
			if p.ID == idSlow {
				s, params = b, "for b"
			}
			if err := s.verify(sub, []byte(params), p.Proof); err != nil {
				t.Fatalf("%s: %v: %v", tr, p.ID, err)
			}
		}
	}
}

// TestStatelessResetAfterRestart: a replica that dies without closing its
// sessions (its socket gone) and comes back on the same port with the same
// key answers the client's next packet with a QUIC stateless reset, so the
// client learns at once that its session is gone instead of after its idle
// timeout.
func TestStatelessResetAfterRestart(t *testing.T) {
	cert, _, _, err := NewCertificate("restart")
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	serve := func(addr string) (context.CancelFunc, net.PacketConn, chan error) {
		c, err := New(Config{Certificate: cert})
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.ServeQUIC(ctx, pc) }()
		return cancel, pc, done
	}
	cancel1, pc1, done1 := serve("127.0.0.1:0")
	addr := pc1.LocalAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := pecwire.DialQUIC(ctx, addr, pecwire.ClientTLS(pecwire.SPKIHash(leaf)), &quic.Config{MaxIdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send(t, c, &pecwire.Register{Version: pecwire.Version})
	recvAs[*pecwire.Registered](t, c)
	// The crash: the socket goes first, so no CONNECTION_CLOSE leaves.
	pc1.Close()
	cancel1()
	<-done1
	cancel2, pc2, done2 := serve(addr)
	defer func() { cancel2(); <-done2; pc2.Close() }()
	send(t, c, &pecwire.Ping{Seq: 1})
	_, err = c.Recv(time.Now().Add(30 * time.Second))
	var reset *quic.StatelessResetError
	if !errors.As(err, &reset) {
		t.Fatalf("after the restart the client got %v, want a stateless reset", err)
	}
}

// TestShutdownTellsClients: when a replica stops, each client hears that
// its session ended (a QUIC CONNECTION_CLOSE, a TCP close) and can fail
// over at once, instead of waiting for missed pings.
func TestShutdownTellsClients(t *testing.T) {
	cert, _, _, err := NewCertificate("stop")
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	c, err := New(Config{Certificate: cert})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- c.ServeQUIC(ctx, pc) }()
	go func() { done <- c.ServeTCP(ctx, ln) }()
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer dcancel()
	pin := pecwire.ClientTLS(pecwire.SPKIHash(leaf))
	qc, err := pecwire.DialQUIC(dctx, pc.LocalAddr().String(), pin, &quic.Config{MaxIdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer qc.Close()
	tcp, err := pecwire.DialTCP(dctx, ln.Addr().String(), pin)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	for _, conn := range []*pecwire.Conn{qc, tcp} {
		send(t, conn, &pecwire.Register{Version: pecwire.Version})
		recvAs[*pecwire.Registered](t, conn)
	}
	cancel()
	<-done
	<-done
	c.Wait()
	for _, conn := range []*pecwire.Conn{qc, tcp} {
		_, err := conn.Recv(time.Now().Add(30 * time.Second))
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Errorf("%s: after the shutdown the client got %v, want the session closed", conn.Transport(), err)
		}
		var app *quic.ApplicationError
		if conn.Transport() == pecwire.QUIC && !errors.As(err, &app) {
			t.Errorf("quic: got %v, want the cloud's CONNECTION_CLOSE", err)
		}
	}
}
