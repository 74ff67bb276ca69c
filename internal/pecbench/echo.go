package pecbench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// EchoServer is the throughput ceiling: a pecwire server on the same
// transports as the cloud that answers every Submit with the same Proof
// frames the cloud would send, taken from templates, without parsing the
// chain or proving anything. What a cloud does per connection beyond what
// the echo does is the cost of proving.
type EchoServer struct {
	// QUIC and TCP are the listeners' addresses.
	QUIC, TCP string
	// Pin is the SHA-256 of the server's SubjectPublicKeyInfo.
	Pin [32]byte

	templates map[pkie.ID]*pkie.Proof
	cancel    context.CancelFunc
	pc        net.PacketConn
	ln        net.Listener
	wg        sync.WaitGroup
}

// StartEcho starts an echo server on loopback. templates are the proofs it
// answers with, by identifier; an identifier without one is answered
// ProofUnsupported, as a cloud that does not host it would. qc is the QUIC
// configuration to listen with (the cloud's, for a like-for-like ceiling);
// nil takes quic-go's defaults.
func StartEcho(templates map[pkie.ID]*pkie.Proof, qc *quic.Config) (*EchoServer, error) {
	cert, pin, err := selfSigned("pkie bench echo")
	if err != nil {
		return nil, err
	}
	tc := pecwire.ServerTLS(cert)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pecbench: echo: %w", err)
	}
	qln, err := quic.Listen(pc, tc, qc)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("pecbench: echo: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		qln.Close()
		pc.Close()
		return nil, fmt.Errorf("pecbench: echo: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &EchoServer{QUIC: pc.LocalAddr().String(), TCP: ln.Addr().String(), Pin: pin, templates: templates, cancel: cancel, pc: pc, ln: ln}
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		defer qln.Close()
		for {
			qconn, err := qln.Accept(ctx)
			if err != nil {
				return
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				c, err := pecwire.AcceptQUIC(ctx, qconn, 0)
				if err != nil {
					return
				}
				e.serve(ctx, c)
			}()
		}
	}()
	go func() {
		defer e.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				c, err := pecwire.AcceptTCP(hctx, nc, tc, 0)
				cancel()
				if err != nil {
					return
				}
				e.serve(ctx, c)
			}()
		}
	}()
	return e, nil
}

// Bundle returns a bundle naming the echo server, for clients that take one.
func (e *EchoServer) Bundle() *pecwire.Bundle {
	return &pecwire.Bundle{Version: pecwire.BundleVersion, Name: "echo", Points: []pecwire.Point{{QUIC: e.QUIC, TCP: e.TCP}},
		SPKISHA256: fmt.Sprintf("%x", e.Pin[:])}
}

func (e *EchoServer) serve(ctx context.Context, c *pecwire.Conn) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	var id pecwire.ClientID
	for {
		m, err := c.Recv(time.Time{})
		if err != nil {
			return
		}
		deadline := time.Now().Add(10 * time.Second)
		switch m := m.(type) {
		case *pecwire.Register:
			rand.Read(id[:])
			err = c.Send(&pecwire.Registered{Version: pecwire.Version, ClientID: id, Keepalive: 15 * time.Second, MaxFrame: pecwire.DefaultMaxFrame}, deadline)
		case *pecwire.Ping:
			err = c.Send(&pecwire.Pong{Seq: m.Seq}, deadline)
		case *pecwire.Submit:
			d := m.Digest()
			for _, r := range m.Requests {
				p := &pecwire.Proof{ClientID: m.ClientID, Nonce: m.Nonce, Digest: d, ID: r.ID, Status: pecwire.ProofUnsupported, Text: "not hosted"}
				if t := e.templates[r.ID]; t != nil {
					p.Status, p.Proof, p.Text = pecwire.ProofOK, t, ""
				}
				if err = c.Send(p, deadline); err != nil {
					break
				}
			}
		default:
			err = c.Send(&pecwire.Error{Code: pecwire.RejectInvalid, Text: fmt.Sprintf("unexpected message type %d", m.Type())}, deadline)
		}
		if err != nil {
			return
		}
	}
}

// Close stops the server and ends its sessions.
func (e *EchoServer) Close() error {
	e.cancel()
	err := e.ln.Close()
	e.wg.Wait()
	return errors.Join(err, e.pc.Close())
}

// selfSigned makes a throwaway ECDSA certificate naming nothing, as a
// cloud's is: clients pin its key.
func selfSigned(cn string) (tls.Certificate, [32]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, [32]byte{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, [32]byte{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, [32]byte{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pecwire.SPKIHash(leaf), nil
}
